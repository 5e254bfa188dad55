/* Symbolic image sizes through convolutions and pooling: meta keeps the
 * symbol where a window preserves it and derives one (floor((h+a)/s)) where
 * it does not, so a conv net with dynamic H and W gets one symbolic plan
 * at every level (channels-last at level 3) whose runs at new sizes equal
 * a static compile of each size, with no compile per signature. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "cge/fused_ops.h"

enum { CI = 3, M = 8, MAXN = 2, MAXHW = 16 };

/* Derived symbols: a function of (symbol, add, div) only, composed exactly. */
static void test_derive(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("d", &g), CGE_OK);
    int64_t h = cge_graph_dim_symbol(g, "h"), w = cge_graph_dim_symbol(g, "w");
    assert_int_equal(cge_dim_derive(h, 0, 1), h);                  /* same padding, stride 1 */
    int64_t h2 = cge_dim_derive(h, 1, 2);                          /* (h+1)/2 */
    assert_true(cge_dim_is_symbol(h2) && cge_dim_is_derived(h2));
    assert_int_equal(cge_dim_derive(h, 1, 2), h2);                 /* equal arithmetic */
    assert_int_not_equal(cge_dim_derive(w, 1, 2), h2);
    assert_int_not_equal(cge_dim_derive(h, 0, 2), h2);
    assert_int_not_equal(cge_dim_derive(h, 1, 3), h2);
    /* floor((floor((h+1)/2) + 1) / 2) = floor((h+3)/4), checked on sizes */
    int64_t h4 = cge_dim_derive(h2, 1, 2);
    assert_int_equal(h4, cge_dim_derive(h, 3, 4));
    for (int64_t v = 0; v < 40; v++)
        assert_int_equal(cge_dim_derive(cge_dim_derive(v, 1, 2), 1, 2), cge_dim_derive(v, 3, 4));
    assert_int_equal(cge_dim_derive(-3 + 0, 0, 1), -3);            /* a symbol stays itself */
    assert_int_equal(cge_dim_derive(7, -8, 2), -1);                /* floor below zero */
    assert_int_equal(cge_dim_derive(CGE_DIM_DYNAMIC, 1, 2), CGE_DIM_DYNAMIC);
    assert_int_equal(cge_dim_derive(h, 5000, 1), CGE_DIM_DYNAMIC); /* outside the encoding */
    assert_int_equal(cge_dim_derive(h, 0, 1000), CGE_DIM_DYNAMIC);
    int64_t hm2 = cge_dim_derive(h, -2, 1);
    assert_int_equal(cge_dim_derive(hm2, 2, 1), h);
    cge_shape s = CGE_SHAPE(h, h2, hm2, cge_dim_derive(w, 0, 2), 4);
    char buf[CGE_SHAPE_STR_MAX];
    assert_string_equal(cge_graph_shape_str(g, &s, buf, sizeof buf), "[h,(h+1)/2,h-2,w/2,4]");
    /* the graph's own table never hands out the derived range */
    assert_int_equal(cge_graph_num_dim_symbols(g), 2);
    assert_null(cge_graph_dim_symbol_name(g, h2));
    cge_graph_destroy(g);
}

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

static void conv(cge_graph *g, const char *name, const char *x, const char *w, const char *b,
                 const char *y, int64_t stride, int64_t pad)
{
    const char *in[] = {x, w, b};
    cge_node *n = NULL;
    node(g, "Conv", name, in, 3, y, &n);
    int64_t pads[4] = {pad, pad, pad, pad}, st[2] = {stride, stride};
    assert_int_equal(cge_node_set_ints(n, "pads", pads, 4), CGE_OK);
    assert_int_equal(cge_node_set_ints(n, "strides", st, 2), CGE_OK);
}

/* x [batch,3,h,w] -> Conv 3x3 pad 1 -> Relu = a; Relu(Conv 3x3 pad 1 (a) + a)
 * = r; Conv 3x3/2 pad 1 (r) + Conv 1x1/2 (r) = d (a residual join of two
 * differently computed (h+1)/2); MaxPool 3x3/1 pad 1 (d) = y, an output.
 * sizes NULL: symbolic; else static {n, h, w}. */
static cge_graph *build(const int64_t *sizes)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("spatial", &g), CGE_OK);
    int64_t n = sizes ? sizes[0] : cge_graph_dim_symbol(g, "batch");
    int64_t h = sizes ? sizes[1] : cge_graph_dim_symbol(g, "h");
    int64_t w = sizes ? sizes[2] : cge_graph_dim_symbol(g, "w");
    cge_shape xs = CGE_SHAPE(n, CI, h, w);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    constant(g, "w1", CGE_SHAPE(M, CI, 3, 3), 0.04f, -0.25f);
    constant(g, "w2", CGE_SHAPE(M, M, 3, 3), 0.02f, -0.12f);
    constant(g, "w3", CGE_SHAPE(M, M, 3, 3), 0.03f, -0.17f);
    constant(g, "w4", CGE_SHAPE(M, M, 1, 1), 0.05f, -0.3f);
    constant(g, "b1", CGE_SHAPE(M), 0.01f, -0.05f);
    constant(g, "b2", CGE_SHAPE(M), 0.02f, -0.07f);
    constant(g, "b3", CGE_SHAPE(M), 0.01f, -0.03f);
    constant(g, "b4", CGE_SHAPE(M), 0.03f, -0.11f);
    conv(g, "conv1", "x", "w1", "b1", "c1", 1, 1);
    node(g, "Relu", "relu1", (const char *[]){"c1"}, 1, "a", NULL);
    conv(g, "conv2", "a", "w2", "b2", "c2", 1, 1);
    node(g, "Add", "residual", (const char *[]){"c2", "a"}, 2, "s", NULL);
    node(g, "Relu", "relu2", (const char *[]){"s"}, 1, "r", NULL);
    conv(g, "conv3", "r", "w3", "b3", "c3", 2, 1);
    conv(g, "down", "r", "w4", "b4", "c4", 2, 0);
    node(g, "Add", "join", (const char *[]){"c3", "c4"}, 2, "d", NULL);
    cge_node *pool = NULL;
    node(g, "MaxPool", "pool", (const char *[]){"d"}, 1, "y", &pool);
    int64_t k3[2] = {3, 3}, p1[4] = {1, 1, 1, 1};
    assert_int_equal(cge_node_set_ints(pool, "kernel_shape", k3, 2), CGE_OK);
    assert_int_equal(cge_node_set_ints(pool, "pads", p1, 4), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

/* Meta keeps h and w through the same-padded convs and derives (h+1)/2 for
 * both stride-2 branches, so the join's operands are provably the same. */
static void test_meta_keeps_symbols(void **state)
{
    (void)state;
    cge_graph *g = build(NULL);
    assert_int_equal(cge_graph_infer(g), CGE_OK);
    cge_tensor_desc a, c3, c4, y;
    assert_int_equal(cge_graph_get_desc(g, "a", &a), CGE_OK);
    assert_int_equal(cge_graph_get_desc(g, "c3", &c3), CGE_OK);
    assert_int_equal(cge_graph_get_desc(g, "c4", &c4), CGE_OK);
    assert_int_equal(cge_graph_get_desc(g, "y", &y), CGE_OK);
    char buf[CGE_SHAPE_STR_MAX];
    assert_string_equal(cge_graph_shape_str(g, &a.shape, buf, sizeof buf), "[batch,8,h,w]");
    assert_string_equal(cge_graph_shape_str(g, &c3.shape, buf, sizeof buf),
                        "[batch,8,(h+1)/2,(w+1)/2]");
    assert_true(cge_shape_same(&c3.shape, &c4.shape));
    assert_true(cge_shape_same(&c3.shape, &y.shape));
    cge_graph_destroy(g);
}

static void run(cge_session *s, const int64_t *sz, float *y, int64_t *ydims)
{
    static float x[MAXN * CI * MAXHW * MAXHW];
    int64_t n = sz[0], h = sz[1], w = sz[2];
    for (int64_t i = 0; i < n * CI * h * w; i++)
        x[i] = (float)((i * 5) % 9) * 0.125f - 0.5f;
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(n, CI, h, w), .data = x,
                     .bytes = sizeof(float) * (size_t)(n * CI * h * w)};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof(float) * MAXN * M * MAXHW * MAXHW};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
    assert_int_equal(out.shape.rank, 4);
    memcpy(ydims, out.shape.dims, sizeof(int64_t) * 4);
}

static cge_session_graph_stats stats_of(cge_session *s)
{
    cge_session_graph_stats st;
    assert_int_equal(cge_session_get_graph_stats(s, 1, &st), CGE_OK);
    return st;
}

/* Every level, plan and replay: one compile, each new (batch, h, w) from the
 * shape program, outputs bit-equal to a static compile of that size. */
static void test_session_dynamic_hw(void **state)
{
    (void)state;
    static const int64_t sizes[][3] = {{1, 8, 8}, {2, 9, 7}, {1, 16, 12}, {1, 5, 6},
                                       {1, 8, 8}, {2, 11, 13}};
    const size_t ns = sizeof sizes / sizeof sizes[0];
    for (int rep = 0; rep < 2; rep++)
    for (cge_opt_level level = CGE_OPT_NONE; level <= CGE_OPT_LAYOUT; level++) {
        cge_session_options so = {.opt_level = level,
                                  .run_mode = rep ? CGE_RUN_REPLAY : CGE_RUN_PLAN};
        cge_session *s = NULL;
        assert_int_equal(cge_session_create(&so, &s), CGE_OK);
        cge_graph *g = build(NULL);
        assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
        cge_graph_destroy(g);
        assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
        cge_session_graph_stats st0 = stats_of(s);
        assert_true(st0.shape_program);
        for (size_t k = 0; k < ns; k++) {
            static float y[MAXN * M * MAXHW * MAXHW], wy[MAXN * M * MAXHW * MAXHW];
            int64_t yd[4], wd[4];
            run(s, sizes[k], y, yd);
            cge_session *r = NULL;
            assert_int_equal(cge_session_create(&so, &r), CGE_OK);
            cge_graph *gs = build(sizes[k]);
            assert_int_equal(cge_session_add_graph(r, 1, gs), CGE_OK);
            cge_graph_destroy(gs);
            run(r, sizes[k], wy, wd);
            cge_session_destroy(r);
            assert_memory_equal(yd, wd, sizeof yd);
            assert_int_equal(yd[2], (sizes[k][1] + 1) / 2);
            assert_int_equal(yd[3], (sizes[k][2] + 1) / 2);
            /* the same kernels on the same shapes: the same bits */
            assert_memory_equal(y, wy, sizeof(float) * (size_t)(yd[0] * M * yd[2] * yd[3]));
        }
        cge_session_graph_stats st = stats_of(s);
        assert_true(st.shape_program);
        assert_int_equal(st.compiles, st0.compiles);   /* none per signature */
        assert_int_equal(st.specializations, 5);   /* distinct signatures */
        cge_session_destroy(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_derive),
        cmocka_unit_test(test_meta_keeps_symbols),
        cmocka_unit_test(test_session_dynamic_hw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
