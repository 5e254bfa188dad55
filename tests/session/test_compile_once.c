/* The session hands a graph to the compiler once per input signature: one
 * clone and one whole-graph inference per compile (counted by the debug
 * counters), none for a signature already compiled; and the pass manager
 * refuses to disable a pass whose result another pass reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

/* y = Relu(MatMul(x, w) + b) * 2: fusions at level 2 and 3 rewrite it, so
 * the optimize stage has new nodes to describe. x is [N,8] or [4,8]. */
static cge_graph *build(bool symbolic)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("once", &g), CGE_OK);
    int64_t n = symbolic ? cge_graph_dim_symbol(g, "N") : 4;
    cge_shape xs = CGE_SHAPE(n, 8), ws = CGE_SHAPE(8, 8), bs = CGE_SHAPE(8), ss = CGE_SHAPE(1);
    float w[64], b[8], two = 2.0f;
    for (int i = 0; i < 64; i++)
        w[i] = (float)(i % 7) * 0.125f - 0.25f;
    for (int i = 0; i < 8; i++)
        b[i] = (float)i * 0.5f - 1.0f;
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, w, sizeof w), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "b", CGE_F32, &bs, b, sizeof b), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "two", CGE_F32, &ss, &two, sizeof two), CGE_OK);
    const char *mm[] = {"x", "w"}, *ad[] = {"m", "b"}, *re[] = {"a"}, *mu[] = {"r", "two"};
    const char *om[] = {"m"}, *oa[] = {"a"}, *orl[] = {"r"}, *oy[] = {"y"};
    assert_int_equal(cge_graph_add_node(g, "MatMul", "", "mm", mm, 2, om, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "add", ad, 2, oa, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Relu", "", "relu", re, 1, orl, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Mul", "", "mul", mu, 2, oy, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

static void run_rows(cge_session *s, int64_t rows)
{
    float x[32 * 8], y[32 * 8];
    for (int i = 0; i < 32 * 8; i++)
        x[i] = (float)(i % 5) - 2.0f;
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(rows, 8), .data = x,
                     .bytes = sizeof x};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof y};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
    assert_int_equal(out.shape.dims[0], rows);
}

static void test_static_graph_compiles_once(void **state)
{
    for (cge_opt_level level = CGE_OPT_NONE; level <= CGE_OPT_LAYOUT; level++) {
        cge_graph *g = build(false);
        cge_session_options so = {.opt_level = level};
        cge_session *s = NULL;
        assert_int_equal(cge_session_create(&so, &s), CGE_OK);
        assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
        int64_t clones = cge_graph_clone_count(), infers = cge_compiler_inference_count();
        assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
        assert_int_equal(cge_graph_clone_count() - clones, 1);
        assert_int_equal(cge_compiler_inference_count() - infers, 1);
        /* Runs at the compiled signature do no graph work at all. */
        run_rows(s, 4);
        run_rows(s, 4);
        assert_int_equal(cge_graph_clone_count() - clones, 1);
        assert_int_equal(cge_compiler_inference_count() - infers, 1);
        cge_session_destroy(s);
        cge_graph_destroy(g);
    }
}

/* With the shape program off (cge_session_options.disable_shape_program),
 * each signature compiles the optimised graph; tests/session/
 * test_shape_program.c holds the default, where none does. */
static void test_symbolic_graph_compiles_once_per_signature(void **state)
{
    cge_graph *g = build(true);
    cge_session *s = NULL;
    cge_session_options so = {.disable_shape_program = true};
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    int64_t clones = cge_graph_clone_count(), infers = cge_compiler_inference_count();
    /* Symbolic inputs: prepared only (checked and inferred symbolically). */
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    assert_int_equal(cge_graph_clone_count() - clones, 1);
    assert_int_equal(cge_compiler_inference_count() - infers, 1);
    cge_tensor_desc d;
    assert_int_equal(cge_session_output_desc(s, 1, 0, &d), CGE_OK);
    assert_int_equal(d.dtype, CGE_F32);
    assert_true(cge_dim_is_symbol(d.shape.dims[0]));
    assert_int_equal(d.shape.dims[1], 8);
    run_rows(s, 3);   /* a new signature: one compile */
    assert_int_equal(cge_graph_clone_count() - clones, 2);
    assert_int_equal(cge_compiler_inference_count() - infers, 2);
    run_rows(s, 3);   /* the same one: none */
    run_rows(s, 5);
    run_rows(s, 3);
    assert_int_equal(cge_graph_clone_count() - clones, 3);
    assert_int_equal(cge_compiler_inference_count() - infers, 3);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

/* 16 compiled signatures per graph; the least recently run one goes first. */
static void test_signatures_evicted_least_recently_run_first(void **state)
{
    cge_graph *g = build(true);
    cge_session *s = NULL;
    cge_session_options so = {.disable_shape_program = true};
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    for (int64_t rows = 1; rows <= 16; rows++)
        run_rows(s, rows);
    run_rows(s, 1);                 /* 1 is now the most recent; 2 the least */
    int64_t clones = cge_graph_clone_count();
    run_rows(s, 17);                /* a 17th signature: 2 is evicted */
    assert_int_equal(cge_graph_clone_count() - clones, 1);
    run_rows(s, 1);                 /* kept */
    run_rows(s, 3);
    assert_int_equal(cge_graph_clone_count() - clones, 1);
    run_rows(s, 2);                 /* compiled again */
    assert_int_equal(cge_graph_clone_count() - clones, 2);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

static void test_needed_passes_cannot_be_disabled(void **state)
{
    cge_graph *g = build(false);
    cge_plan *p = NULL;
    cge_compile_options o = {.disable = "order"};
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_ERR_INVALID_ARG);
    assert_non_null(strstr(cge_last_error(), "'order'"));
    assert_null(p);
    o.disable = "infer";
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_ERR_INVALID_ARG);
    assert_non_null(strstr(cge_last_error(), "cannot be disabled"));
    /* schedule only improves build/order's order: disabling it is fine. */
    o.disable = "schedule,plan_streams";
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    assert_true(cge_plan_is_complete(p));
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

static void test_value_dependent_graph_comes_back_prepared(void **state)
{
    /* NonZero's output size depends on the data: the compiler returns the
     * prepared graph when asked to, and an error otherwise. */
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("vd", &g), CGE_OK);
    cge_shape xs = CGE_SHAPE(6);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    const char *ni[] = {"x"}, *no[] = {"y"};
    assert_int_equal(cge_graph_add_node(g, "NonZero", "", "nz", ni, 1, no, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    cge_plan *p = NULL;
    cge_compile_options o = {0};
    assert_int_not_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    assert_null(p);
    o.allow_incomplete = true;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    assert_false(cge_plan_is_complete(p));
    assert_int_equal(cge_plan_num_steps(p), 0);
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(cge_plan_graph(p), "y", &d), CGE_OK);
    assert_int_equal(d.dtype, CGE_I64);
    cge_plan_destroy(p);
    /* A session runs it node by node. */
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    float x[6] = {0, 1, 0, 2, 3, 0};
    int64_t y[6];
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = xs, .data = x, .bytes = sizeof x};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof y};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
    assert_int_equal(out.shape.rank, 2);
    assert_int_equal(out.shape.dims[1], 3);
    assert_int_equal(y[0], 1);
    assert_int_equal(y[2], 4);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

static void test_session_runs_a_compiled_plan(void **state)
{
    cge_graph *g = build(false);
    cge_plan *p = NULL;
    cge_compile_options o = {0};
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    int64_t clones = cge_graph_clone_count(), infers = cge_compiler_inference_count();
    assert_int_equal(cge_session_add_plan(s, 1, p, NULL, NULL, NULL), CGE_OK);
    assert_int_equal(cge_session_add_plan(s, 1, p, NULL, NULL, NULL), CGE_ERR_EXISTS);
    run_rows(s, 4);
    /* No compile: the plan is used as it is. */
    assert_int_equal(cge_graph_clone_count() - clones, 0);
    assert_int_equal(cge_compiler_inference_count() - infers, 0);
    cge_tensor_desc d;
    assert_int_equal(cge_session_output_desc(s, 1, 0, &d), CGE_OK);
    assert_int_equal(d.shape.dims[0], 4);
    cge_session_destroy(s);
    cge_plan_destroy(p);
    /* A prepared-only plan cannot be run as a plan. */
    cge_graph *dyn = build(true);
    o.allow_incomplete = true;
    assert_int_equal(cge_compile(dyn, NULL, 0, &o, &p), CGE_OK);
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_plan(s, 1, p, NULL, NULL, NULL), CGE_ERR_INVALID_ARG);
    assert_non_null(strstr(cge_last_error(), "[session]"));
    cge_session_destroy(s);
    cge_plan_destroy(p);
    cge_graph_destroy(dyn);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_graph_compiles_once),
        cmocka_unit_test(test_symbolic_graph_compiles_once_per_signature),
        cmocka_unit_test(test_signatures_evicted_least_recently_run_first),
        cmocka_unit_test(test_needed_passes_cannot_be_disabled),
        cmocka_unit_test(test_value_dependent_graph_comes_back_prepared),
        cmocka_unit_test(test_session_runs_a_compiled_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
