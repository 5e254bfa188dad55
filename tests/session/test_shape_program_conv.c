/* A conv net with a symbolic batch keeps its channels-last steps in the
 * symbolic plan: the same steps as a static compile at each batch, results
 * equal to it; and a graph whose symbolic plan would lose them (anonymous
 * dims) compiles per signature instead. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "cge/fused_ops.h"

enum { CI = 3, HW = 8, M = 8, PH = HW / 2, MAXN = 5 };

static void node(cge_graph *g, const char *op, const char *name, const char **in, int ni,
                 const char *out, cge_node **n)
{
    assert_int_equal(cge_graph_add_node(g, op, "", name, in, ni, &out, 1, n), CGE_OK);
}

static void constant(cge_graph *g, const char *name, cge_shape s, float scale, float shift)
{
    int64_t count = 1;
    for (int32_t i = 0; i < s.rank; i++)
        count *= s.dims[i];
    float *v = malloc(sizeof(float) * (size_t)count);
    assert_non_null(v);
    for (int64_t i = 0; i < count; i++)
        v[i] = (float)((i * 7 + (int64_t)strlen(name)) % 13) * scale + shift;
    assert_int_equal(cge_graph_add_constant(g, name, CGE_F32, &s, v, sizeof(float) * (size_t)count),
                     CGE_OK);
    free(v);
}

/* x [N,3,8,8] -> Conv 3x3 -> BatchNormalization -> Relu = a;
 * Relu(Conv 3x3 (a) + a) = r; MaxPool 2x2 (r) -> Conv 1x1 = feat [N,8,4,4]
 * (an output: reordered back to NCHW at the border);
 * Flatten(GlobalAveragePool(feat)) = y [N,8].
 * n > 0: static batch n; 0: the symbol "batch"; -1: an anonymous batch. */
static cge_graph *build(int64_t n)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("convnet", &g), CGE_OK);
    int64_t b = n > 0 ? n : n == 0 ? cge_graph_dim_symbol(g, "batch") : CGE_DIM_DYNAMIC;
    cge_shape xs = CGE_SHAPE(b, CI, HW, HW);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    constant(g, "w1", CGE_SHAPE(M, CI, 3, 3), 0.04f, -0.25f);
    constant(g, "w2", CGE_SHAPE(M, M, 3, 3), 0.02f, -0.12f);
    constant(g, "b2", CGE_SHAPE(M), 0.01f, -0.05f);
    constant(g, "w3", CGE_SHAPE(M, M, 1, 1), 0.05f, -0.3f);
    constant(g, "scale", CGE_SHAPE(M), 0.1f, 0.5f);
    constant(g, "bias", CGE_SHAPE(M), 0.02f, -0.1f);
    constant(g, "mean", CGE_SHAPE(M), 0.01f, -0.05f);
    constant(g, "var", CGE_SHAPE(M), 0.1f, 0.4f);
    const char *c1[] = {"x", "w1"}, *bn[] = {"c1", "scale", "bias", "mean", "var"};
    const char *r1[] = {"n1"}, *c2[] = {"a", "w2", "b2"}, *ad[] = {"c2", "a"}, *r2[] = {"s"};
    const char *mp[] = {"r"}, *c3[] = {"p", "w3"}, *gp[] = {"feat"}, *fl[] = {"gap"};
    int64_t pads[4] = {1, 1, 1, 1}, k2[2] = {2, 2};
    cge_node *n1 = NULL, *n2 = NULL, *pool = NULL;
    node(g, "Conv", "conv1", c1, 2, "c1", &n1);
    assert_int_equal(cge_node_set_ints(n1, "pads", pads, 4), CGE_OK);
    node(g, "BatchNormalization", "bn", bn, 5, "n1", NULL);
    node(g, "Relu", "relu1", r1, 1, "a", NULL);
    node(g, "Conv", "conv2", c2, 3, "c2", &n2);
    assert_int_equal(cge_node_set_ints(n2, "pads", pads, 4), CGE_OK);
    node(g, "Add", "residual", ad, 2, "s", NULL);
    node(g, "Relu", "relu2", r2, 1, "r", NULL);
    node(g, "MaxPool", "pool", mp, 1, "p", &pool);
    assert_int_equal(cge_node_set_ints(pool, "kernel_shape", k2, 2), CGE_OK);
    assert_int_equal(cge_node_set_ints(pool, "strides", k2, 2), CGE_OK);
    node(g, "Conv", "conv3", c3, 2, "feat", NULL);
    node(g, "GlobalAveragePool", "gap", gp, 1, "gap", NULL);
    node(g, "Flatten", "flat", fl, 1, "y", NULL);
    assert_int_equal(cge_graph_add_output(g, "feat"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

/* The launched steps' op types, sorted, joined by spaces; with the count of
 * channels-last FusedConvs and of Reorders. */
static void step_ops(const cge_plan *p, char *buf, size_t cap, int *cl_convs, int *reorders)
{
    const cge_plan_step *steps = cge_plan_steps(p);
    int32_t ns = cge_plan_num_steps(p), k = 0;
    const char **ops = calloc((size_t)ns + 1, sizeof *ops);
    assert_non_null(ops);
    *cl_convs = *reorders = 0;
    for (int32_t t = 0; t < ns; t++) {
        if (steps[t].folded)
            continue;
        const char *op = cge_node_op_type(steps[t].node);
        ops[k++] = op;
        if (!strcmp(op, "FusedConv") &&
            cge_attrs_get_int(cge_node_attrs_const(steps[t].node), "channels_last", 0))
            (*cl_convs)++;
        if (!strcmp(op, "Reorder"))
            (*reorders)++;
    }
    for (int32_t i = 1; i < k; i++)   /* insertion sort: a few steps */
        for (int32_t j = i; j > 0 && strcmp(ops[j - 1], ops[j]) > 0; j--) {
            const char *t = ops[j];
            ops[j] = ops[j - 1];
            ops[j - 1] = t;
        }
    buf[0] = '\0';
    for (int32_t i = 0; i < k; i++) {
        strncat(buf, ops[i], cap - strlen(buf) - 1);
        strncat(buf, " ", cap - strlen(buf) - 1);
    }
    free(ops);
}

/* The symbolic plan has the channels-last steps a static compile has, and
 * each batch's specialisation runs the same steps as that batch's compile. */
static void test_symbolic_plan_is_channels_last(void **state)
{
    (void)state;
    if (!cge_fused_conv_channels_last_available())
        skip();
    cge_device *dev = NULL;
    assert_int_equal(cge_device_create_cpu(NULL, &dev), CGE_OK);
    cge_graph *g = build(0);
    cge_compile_options so = {.opt_level = CGE_OPT_LAYOUT, .allow_incomplete = true,
                              .symbolic_plan = true, .device = dev};
    cge_plan *sym = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &so, &sym), CGE_OK);
    assert_true(cge_plan_is_symbolic(sym));
    char sym_ops[1024], ops[1024], want[1024];
    int cl = 0, re = 0, wcl = 0, wre = 0;
    step_ops(sym, sym_ops, sizeof sym_ops, &cl, &re);
    assert_int_equal(cl, 3);              /* every convolution */
    assert_true(re >= 2);                 /* x in; feat out */
    assert_non_null(strstr(sym_ops, "ChannelsLastPool"));
    assert_null(strstr(sym_ops, " Conv "));   /* no plain Conv left */
    assert_int_not_equal(strncmp(sym_ops, "Conv ", 5), 0);
    static const int64_t sizes[] = {1, 2, 3, 5};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cge_shape xs = CGE_SHAPE(sizes[i], CI, HW, HW);
        cge_plan *p = NULL, *ref = NULL;
        assert_int_equal(cge_plan_specialize(sym, &xs, 1, dev, &p), CGE_OK);
        cge_graph *gs = build(sizes[i]);
        cge_compile_options co = {.opt_level = CGE_OPT_LAYOUT, .device = dev};
        assert_int_equal(cge_compile(gs, NULL, 0, &co, &ref), CGE_OK);
        step_ops(p, ops, sizeof ops, &cl, &re);
        step_ops(ref, want, sizeof want, &wcl, &wre);
        assert_string_equal(ops, want);
        assert_int_equal(cl, wcl);
        cge_plan_destroy(p);
        cge_plan_destroy(ref);
        cge_graph_destroy(gs);
    }
    cge_plan_destroy(sym);
    cge_graph_destroy(g);
    cge_device_destroy(dev);
}

static void run(cge_session *s, int64_t n, float *feat, float *y)
{
    static float x[MAXN * CI * HW * HW];
    for (int i = 0; i < MAXN * CI * HW * HW; i++)
        x[i] = (float)((i * 5) % 9) * 0.125f - 0.5f;
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(n, CI, HW, HW), .data = x,
                     .bytes = sizeof(float) * (size_t)(n * CI * HW * HW)};
    cge_tensor out[2] = {{.name = "feat", .data = feat, .bytes = sizeof(float) * MAXN * M * PH * PH},
                         {.name = "y", .data = y, .bytes = sizeof(float) * MAXN * M}};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, out, 2), CGE_OK);
    assert_int_equal(out[0].shape.dims[0], n);
    assert_int_equal(out[1].shape.dims[0], n);
}

static cge_session_graph_stats stats_of(cge_session *s)
{
    cge_session_graph_stats st;
    assert_int_equal(cge_session_get_graph_stats(s, 1, &st), CGE_OK);
    return st;
}

/* Sessions at every level and in both modes: a symbolic batch serves every
 * size from the shape program (an anonymous one by compiles, since its
 * symbolic plan could not be channels-last), equal to a static compile. */
static void check_session(int64_t batch_kind, bool want_shape_program)
{
    static const int64_t sizes[] = {1, 4, 2, 3, 1, 5};
    for (int rep = 0; rep < 2; rep++)
    for (cge_opt_level level = CGE_OPT_NONE; level <= CGE_OPT_LAYOUT; level++) {
        cge_session_options so = {.opt_level = level,
                                  .run_mode = rep ? CGE_RUN_REPLAY : CGE_RUN_PLAN};
        cge_session *s = NULL;
        assert_int_equal(cge_session_create(&so, &s), CGE_OK);
        cge_graph *g = build(batch_kind);
        assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
        cge_graph_destroy(g);
        assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
        bool sp = want_shape_program || level < CGE_OPT_LAYOUT ||
                  !cge_fused_conv_channels_last_available();
        assert_int_equal(stats_of(s).shape_program, sp);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            static float feat[MAXN * M * PH * PH], y[MAXN * M], wf[MAXN * M * PH * PH],
                wy[MAXN * M];
            int64_t n = sizes[k];
            run(s, n, feat, y);
            cge_session *r = NULL;
            assert_int_equal(cge_session_create(&so, &r), CGE_OK);
            cge_graph *gs = build(n);
            assert_int_equal(cge_session_add_graph(r, 1, gs), CGE_OK);
            cge_graph_destroy(gs);
            run(r, n, wf, wy);
            cge_session_destroy(r);
            if (want_shape_program) {
                /* the same kernels on the same shapes: the same bits */
                assert_memory_equal(feat, wf, sizeof(float) * (size_t)(n * M * PH * PH));
                assert_memory_equal(y, wy, sizeof(float) * (size_t)(n * M));
            } else {
                /* below level 3 an anonymous batch's symbolic plan does not
                 * fuse (a residual sum rounds differently) */
                for (int64_t i = 0; i < n * M * PH * PH; i++)
                    assert_float_equal(feat[i], wf[i], 1e-5f * (1.0f + fabsf(wf[i])));
                for (int64_t i = 0; i < n * M; i++)
                    assert_float_equal(y[i], wy[i], 1e-5f * (1.0f + fabsf(wy[i])));
            }
        }
        cge_session_graph_stats st = stats_of(s);
        assert_int_equal(st.shape_program, sp);
        if (sp)
            assert_int_equal(st.specializations, 5);   /* distinct batches */
        cge_session_destroy(s);
    }
}

static void test_symbolic_batch_matches_static(void **state)
{
    (void)state;
    check_session(0, true);
}

/* Anonymous dims (-1) are never provably equal, so the convolutions and
 * their residual Add stay plain ONNX nodes in a symbolic plan: at level 3
 * the session compiles per signature (loses_channels_last in session.c). */
static void test_anonymous_batch_compiles_per_signature(void **state)
{
    (void)state;
    check_session(-1, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symbolic_plan_is_channels_last),
        cmocka_unit_test(test_symbolic_batch_matches_static),
        cmocka_unit_test(test_anonymous_batch_compiles_per_signature),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
