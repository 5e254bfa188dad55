/* A graph whose inputs have known sizes but some of whose shapes follow
 * computed values (a detector: NonZero after its convolutions) is
 * partitioned too when the compiler hands it back incomplete, so that its
 * node-by-node runs get the layout passes' channels-last convolutions (the
 * plain layout cost each oneDNN convolution a reorder of its input and one
 * of its output per run, and its 1x1 layers a GEMM path reading W in
 * place). Checked: the incomplete plan's graph has its convolution
 * channels-last (where this build has oneDNN) and a layout conversion back
 * for the value-dependent part; a session's runs give the reference's
 * results at two inputs; a graph with symbolic input dims still compiles
 * incomplete. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "cge/fused_ops.h"
#include "session_test_util.h"

enum { C = 16, M = 16, H = 12 };

static float W[M * C * 9], B[M];

static void fill(void)
{
    for (int i = 0; i < M * C * 9; i++)
        W[i] = (float)((i * 7) % 13) * 0.03125f - 0.1875f;
    for (int i = 0; i < M; i++)
        B[i] = (float)(i % 5) * 0.0625f - 0.125f;
}


/* y = Relu(Conv3x3(x, W, B), pads 1); nz = NonZero(y > 0.5). */
static cge_graph *build(int64_t batch)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("eager_layout", &g), CGE_OK);
    cge_shape xs = CGE_SHAPE(batch, C, H, H), ws = CGE_SHAPE(M, C, 3, 3), bs = CGE_SHAPE(M),
              one = CGE_SHAPE(1);
    static const float half = 0.5f;
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, W, sizeof W), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "b", CGE_F32, &bs, B, sizeof B), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "half", CGE_F32, &one, &half, sizeof half),
                     CGE_OK);
    const char *cv[] = {"x", "w", "b"}, *re[] = {"c"}, *gt[] = {"y", "half"}, *nz[] = {"pos"};
    cge_node *conv = NULL;
    st_add_node(g, "Conv", "conv", cv, 3, "c", &conv);
    static const int64_t pads[] = {1, 1, 1, 1}, k[] = {3, 3};
    assert_int_equal(cge_node_set_ints(conv, "pads", pads, 4), CGE_OK);
    assert_int_equal(cge_node_set_ints(conv, "kernel_shape", k, 2), CGE_OK);
    st_add_node(g, "Relu", "relu", re, 1, "y", NULL);
    st_add_node(g, "Greater", "gt", gt, 2, "pos", NULL);
    st_add_node(g, "NonZero", "nz", nz, 1, "nz", NULL);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "nz"), CGE_OK);
    return g;
}

static int count_channels_last_convs(const cge_graph *g, int *reorders)
{
    int convs = 0;
    *reorders = 0;
    for (int32_t i = 0; i < cge_graph_num_nodes(g); i++) {
        const cge_node *n = cge_graph_node(g, i);
        if (cge_node_is_removed(n))
            continue;
        if (!strcmp(cge_node_op_type(n), "FusedConv") &&
            cge_attrs_get_int(cge_node_attrs_const(n), "channels_last", 0))
            convs++;
        if (!strcmp(cge_node_op_type(n), "Reorder"))
            (*reorders)++;
    }
    return convs;
}

static void test_incomplete_plan_is_partitioned(void **state)
{
    (void)state;
    if (!cge_fused_conv_channels_last_available())
        skip(); /* no oneDNN: convolutions stay in the plain layout */
    cge_device *dev = NULL;
    cge_device_options dopt = {0};
    assert_int_equal(cge_device_create_cpu(&dopt, &dev), CGE_OK);
    cge_graph *g = build(1);
    cge_compile_options o = {.device = dev, .allow_incomplete = true};
    cge_plan *p = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    assert_false(cge_plan_is_complete(p));
    int reorders = 0;
    assert_int_equal(count_channels_last_convs(cge_plan_graph(p), &reorders), 1);
    assert_true(reorders >= 1); /* y back to NCHW for its readers and the caller */
    cge_plan_destroy(p);
    /* the same graph with a symbolic batch still compiles (prepared and
     * optimised, dims symbolic) */
    cge_graph *sym = build(-1);
    assert_int_equal(cge_compile(sym, NULL, 0, &o, &p), CGE_OK);
    assert_false(cge_plan_is_complete(p));
    cge_plan_destroy(p);
    cge_graph_destroy(sym);
    cge_graph_destroy(g);
    cge_device_destroy(dev);
}

static double reference(const float *x, int m, int i, int j)
{
    double acc = B[m];
    for (int c = 0; c < C; c++)
        for (int u = 0; u < 3; u++)
            for (int v = 0; v < 3; v++) {
                int a = i + u - 1, b = j + v - 1;
                if (a < 0 || b < 0 || a >= H || b >= H)
                    continue;
                acc += (double)x[(c * H + a) * H + b] * (double)W[((m * C + c) * 3 + u) * 3 + v];
            }
    return acc > 0 ? acc : 0;
}

static void run_and_check(cge_session *s, const float *x)
{
    static float y[M * H * H];
    static int64_t nz[4 * M * H * H];
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(1, C, H, H),
                     .data = (void *)x, .bytes = sizeof(float) * C * H * H};
    cge_tensor out[2] = {{.name = "y", .data = y, .bytes = sizeof y},
                         {.name = "nz", .data = nz, .bytes = sizeof nz}};
    cge_status rs = cge_session_run_graph(s, 1, &in, 1, out, 2);
    if (rs)
        print_error("%s\n", cge_last_error());
    assert_int_equal(rs, CGE_OK);
    int64_t count = 0;
    for (int m = 0; m < M; m++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < H; j++) {
                float got = y[(m * H + i) * H + j];
                assert_float_equal(got, reference(x, m, i, j), 1e-4);
                count += got > 0.5f;
            }
    assert_int_equal(out[1].shape.rank, 2);
    assert_int_equal(out[1].shape.dims[0], 4);
    assert_int_equal(out[1].shape.dims[1], count);
    /* NonZero's coordinates index y in NCHW order, whatever its layout inside */
    for (int64_t k = 0; k < count; k++) {
        int64_t m = nz[count + k], i = nz[2 * count + k], j = nz[3 * count + k];
        assert_int_equal(nz[k], 0);
        assert_true(y[(m * H + i) * H + j] > 0.5f);
    }
}

static void test_node_by_node_runs_match_reference(void **state)
{
    (void)state;
    cge_graph *g = build(1);
    cge_session_options so = {.num_threads = 2};
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    static float x[C * H * H], x2[C * H * H];
    for (int i = 0; i < C * H * H; i++) {
        x[i] = (float)((i * 5) % 11) * 0.125f - 0.625f;
        x2[i] = -x[i] * 0.75f;
    }
    run_and_check(s, x);
    run_and_check(s, x2); /* another count of positions: NonZero's size follows */
    run_and_check(s, x);
    cge_session_destroy(s);
}

int main(void)
{
    fill();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_incomplete_plan_is_partitioned),
        cmocka_unit_test(test_node_by_node_runs_match_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
