/* Plans as a whole: per-signature compiles of graphs with dynamic dims and
 * the plan cache, the pass manager's options (levels, enable/disable, dumps,
 * statistics), stream planning with events, and argument errors. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "compiler/plan_builder.h"
#include "ct_util.h"

static cge_graph *dynamic_graph(void)
{
    cge_graph *g = ct_graph("dyn");
    ct_input(g, "x", CGE_SHAPE(-1, 8));
    ct_const_scalar(g, "two", 2.0f);
    ct_node(g, "Mul", "x", "two", "a");
    ct_node(g, "Exp", "a", NULL, "y");
    ct_output(g, "y");
    return g;
}

static void test_dynamic_needs_signature(void **state)
{
    cge_graph *g = dynamic_graph();
    cge_compile_options o = ct_opts(CGE_OPT_FUSE);
    cge_plan *p = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_ERR_SHAPE);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_META);
    cge_shape bad = CGE_SHAPE(4, 9);
    assert_int_equal(cge_compile(g, &bad, 1, &o, &p), CGE_ERR_SHAPE);
    assert_int_equal(cge_compile(g, &bad, 2, &o, &p), CGE_ERR_INVALID_ARG);
    cge_shape s = CGE_SHAPE(4, 8);
    assert_int_equal(cge_compile(g, &s, 1, &o, &p), CGE_OK);
    const cge_plan_value *y = &cge_plan_values(p)[cge_plan_output_value(p, 0)];
    assert_true(cge_shape_equal(&y->shape, &s));
    /* The caller's graph is untouched: its input stays dynamic. */
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(g, "x", &d), CGE_OK);
    assert_int_equal(d.shape.dims[0], CGE_DIM_DYNAMIC);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

/* One graph, one plan per signature: each sized and run for its own shapes
 * (sessions keep such plans per signature; see tests/session). */
static void test_plan_per_signature(void **state)
{
    cge_graph *g = dynamic_graph();
    cge_compile_options o = ct_opts(CGE_OPT_FUSE);
    cge_shape s4 = CGE_SHAPE(4, 8), s2 = CGE_SHAPE(2, 8);
    cge_plan *p4 = NULL, *p2 = NULL;
    assert_int_equal(cge_compile(g, &s4, 1, &o, &p4), CGE_OK);
    assert_int_equal(cge_compile(g, &s2, 1, &o, &p2), CGE_OK);
    /* x, and a and y in place in one buffer (never in place in an input's) */
    assert_int_equal(cge_plan_arena_bytes(p4), 2 * 4 * 8 * 4);
    assert_int_equal(cge_plan_arena_bytes(p2), 2 * 2 * 8 * 4);
    cge_tensor in, out;
    float xs[16];
    for (int i = 0; i < 16; i++)
        xs[i] = (float)i * 0.1f;
    in = (cge_tensor){"x", CGE_F32, s2, xs, sizeof xs};
    assert_int_equal(ct_run_plan(p2, &in, 1, &out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out.shape, &s2));
    ct_free_outputs(&out, 1);
    cge_plan_destroy(p4);
    cge_plan_destroy(p2);
    cge_graph_destroy(g);
}

static void test_options(void **state)
{
    cge_graph *g = dynamic_graph();
    cge_shape s = CGE_SHAPE(4, 8);
    cge_plan *p = NULL;
    cge_compile_options o = ct_opts(CGE_OPT_FUSE);
    o.disable = "cse,no_such_pass";
    assert_int_equal(cge_compile(g, &s, 1, &o, &p), CGE_ERR_INVALID_ARG);
    assert_non_null(strstr(cge_last_error(), "no_such_pass"));
    o.disable = "fuse_elementwise";
    assert_int_equal(cge_compile(g, &s, 1, &o, &p), CGE_OK);
    assert_int_equal(cge_plan_num_steps(p), 2);
    cge_plan_destroy(p);
    o.disable = NULL;
    assert_int_equal(cge_compile(g, &s, 1, &o, &p), CGE_OK);
    assert_int_equal(cge_plan_num_steps(p), 1);
    /* Statistics: every pass that ran, the fusion's count. */
    const cge_plan_stats *st = cge_plan_get_stats(p);
    assert_true(st->num_passes > 10);
    bool saw = false;
    for (int32_t i = 0; i < st->num_passes; i++)
        if (!strcmp(st->passes[i].name, "fuse_elementwise")) {
            saw = true;
            assert_int_equal(st->passes[i].fused, 2);
            assert_int_equal(st->passes[i].nodes_before, 2);
            assert_int_equal(st->passes[i].nodes_after, 1);
        }
    assert_true(saw);
    assert_int_equal(st->nodes_in, 2);
    assert_int_equal(st->nodes_out, 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(cge_plan_write_stats(p, f), CGE_OK);
    assert_int_equal(cge_plan_write_text(p, f), CGE_OK);
    fclose(f);
    assert_non_null(strstr(buf, "lower bound"));
    assert_non_null(strstr(buf, "ElementwiseChain"));
    free(buf);
    cge_plan_destroy(p);
    o.opt_level = (cge_opt_level)9;
    assert_int_equal(cge_compile(g, &s, 1, &o, &p), CGE_ERR_INVALID_ARG);
    /* Pass table. */
    const char *stage, *name;
    cge_opt_level lvl;
    assert_true(cge_compiler_pass_info(0, &stage, &name, &lvl));
    assert_string_equal(stage, "prepare");
    assert_false(cge_compiler_pass_info(cge_compiler_num_passes(), &stage, &name, &lvl));
    cge_graph_destroy(g);
}

static void test_dump_dir(void **state)
{
    char dir[] = "/tmp/cge_dump_XXXXXX";
    assert_non_null(mkdtemp(dir));
    cge_graph *g = dynamic_graph();
    cge_shape s = CGE_SHAPE(4, 8);
    cge_compile_options o = ct_opts(CGE_OPT_FUSE);
    o.dump_dir = dir;
    cge_plan *p = NULL;
    assert_int_equal(cge_compile(g, &s, 1, &o, &p), CGE_OK);
    cge_plan_destroy(p);
    int files = 0, dots = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        files++;
        dots += strstr(e->d_name, ".dot") != NULL;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
    assert_true(dots >= 10);
    assert_int_equal(files, 2 * dots);
    cge_graph_destroy(g);
}

static void test_streams(void **state)
{
    /* Two independent branches joined at the end. */
    float w[32 * 32];
    for (int i = 0; i < 32 * 32; i++)
        w[i] = (float)((i * 5) % 9) * 0.05f - 0.2f;
    cge_graph *g = ct_graph("branches");
    ct_input(g, "x", CGE_SHAPE(16, 32));
    ct_const_f32(g, "w", CGE_SHAPE(32, 32), w);
    ct_node(g, "MatMul", "x", "w", "a1");
    ct_node(g, "Tanh", "a1", NULL, "a2");
    ct_node(g, "MatMul", "a2", "w", "a3");
    ct_node(g, "Exp", "x", NULL, "b1");
    ct_node(g, "MatMul", "b1", "w", "b2");
    ct_node(g, "Sigmoid", "b2", NULL, "b3");
    ct_node(g, "Add", "a3", "b3", "y");
    ct_output(g, "y");
    cge_compile_options o = ct_opts(CGE_OPT_NONE);
    o.num_streams = 2;
    cge_plan *p = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    assert_int_equal(cge_plan_num_streams(p), 2);
    assert_true(cge_plan_num_events(p) >= 1);
    int32_t waits = 0;
    for (int32_t t = 0; t < cge_plan_num_steps(p); t++)
        waits += cge_plan_steps(p)[t].num_waits;
    assert_true(waits >= 1);
    assert_int_equal(cge_plan_verify(p), CGE_OK);
    /* Each wait is needed: without it a read could run before its producer
     * (or memory be reused under a reader), which the verifier refuses, as
     * it does for a model file whose steps say so. */
    cge_plan_step *steps = cge__plan_steps_mut(p);
    int32_t n = cge_plan_num_steps(p);
    for (int32_t t = 0; t < n; t++) {
        int32_t nw = steps[t].num_waits;
        if (!nw)
            continue;
        steps[t].num_waits = 0;
        assert_int_equal(cge_plan_verify(p), CGE_ERR_INTERNAL);
        assert_non_null(strstr(cge_last_error(), "step"));
        steps[t].num_waits = nw;
    }
    /* A step moved to the other stream, with no event to order it. */
    for (int32_t t = 0; t < n; t++) {
        if (steps[t].num_waits || steps[t].record >= 0)
            continue;
        int32_t s = steps[t].stream;
        steps[t].stream = 1 - s;
        cge_status rc = cge_plan_verify(p);
        steps[t].stream = s;
        if (rc != CGE_OK) {
            waits = -1; /* found one the verifier refuses */
            break;
        }
    }
    assert_int_equal(waits, -1);
    assert_int_equal(cge_plan_verify(p), CGE_OK);
    cge_plan_destroy(p);
    for (int rep = 0; rep < 5; rep++)
        ct_assert_equivalent(g, &o, 0, 0.0);
    o.num_streams = 1;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    assert_int_equal(cge_plan_num_streams(p), 1);
    assert_int_equal(cge_plan_num_events(p), 0);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

static void test_resize_with_constant_scales(void **state)
{
    /* The plan asks Resize for its workspace before any data exists: the
     * size must come from the shapes alone (it once needed the scales' data
     * and every plan run failed with "missing workspace"). */
    static const float scales[4] = {1, 1, 2, 2};
    float xin[4] = {1, 2, 3, 4};
    cge_graph *g = ct_graph("upsample");
    ct_input(g, "x", CGE_SHAPE(1, 1, 2, 2));
    ct_const_f32(g, "scales", CGE_SHAPE(4), scales);
    const char *ins[3] = {"x", "", "scales"}, *outs[1] = {"y"};
    ct_node_n(g, "Resize", "", ins, 3, outs, 1);
    ct_output(g, "y");
    for (cge_opt_level l = CGE_OPT_NONE; l <= CGE_OPT_LAYOUT; l++) {
        cge_compile_options o = ct_opts(l);
        cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(1, 1, 2, 2),
                         .data = xin, .bytes = sizeof xin}, out;
        cge_plan *p = NULL;
        if (ct_compile_run(g, &o, &in, 1, &out, 1, &p))
            fail_msg("level %d: %s", (int)l - 1, cge_last_error());
        const float *y = out.data;
        assert_float_equal(y[0], 1.0f, 0);  /* nearest, 2x: [[1,1,2,2],...] */
        assert_float_equal(y[3], 2.0f, 0);
        assert_float_equal(y[15], 4.0f, 0);
        ct_free_outputs(&out, 1);
        cge_plan_destroy(p);
    }
    cge_graph_destroy(g);
}

static void test_schedule_lowers_peak(void **state)
{
    /* Insertion order computes four big branches first and reduces them
     * last; the scheduler interleaves so that fewer are live at once. */
    cge_graph *g = ct_graph("sched");
    ct_input(g, "x", CGE_SHAPE(4096));
    const char *e[4] = {"e0", "e1", "e2", "e3"}, *s[4] = {"s0", "s1", "s2", "s3"};
    for (int i = 0; i < 4; i++)
        ct_node(g, "Exp", "x", NULL, e[i]);
    for (int i = 0; i < 4; i++) {
        cge_node *r = ct_node(g, "ReduceSum", e[i], NULL, s[i]);
        (void)r;
    }
    ct_node(g, "Add", "s0", "s1", "t0");
    ct_node(g, "Add", "s2", "s3", "t1");
    ct_node(g, "Add", "t0", "t1", "y");
    ct_output(g, "y");
    cge_compile_options o = ct_opts(CGE_OPT_NONE);
    cge_plan *with = NULL, *without = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &with), CGE_OK);
    o.disable = "schedule";
    assert_int_equal(cge_compile(g, NULL, 0, &o, &without), CGE_OK);
    assert_true(cge_plan_arena_bytes(with) < cge_plan_arena_bytes(without));
    cge_plan_destroy(with);
    cge_plan_destroy(without);
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dynamic_needs_signature),
        cmocka_unit_test(test_plan_per_signature),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_dump_dir),
        cmocka_unit_test(test_streams),
        cmocka_unit_test(test_schedule_lowers_peak),
        cmocka_unit_test(test_resize_with_constant_scales),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
