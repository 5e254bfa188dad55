/* What a new input signature of a symbolic convolution net costs, counted:
 * its plan serves every batch bit-equal to a static compile of that batch,
 * each new batch makes each oneDNN convolution once (its workspace query
 * makes none: the primitive descriptor answers it), a batch seen before makes
 * nothing, and the arena never grows past the largest batch seen. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

/* Internal counters (src/ops/dnnl_conv.c), linked from the static library. */
int cge__dnnl_available(void);
void cge__dnnl_conv_counts(int64_t *made, int64_t *queried);
int64_t cge__dnnl_weight_reorders(void);
int64_t cge__dnnl_conv_winograd_made(void);
int64_t cge__dnnl_conv_blocked8_made(void);

enum { C = 8, H = 10, MAXN = 6, NCONV = 2 };

/* x [N,8,10,10] -> Conv 3x3 pad 1 -> Relu -> Conv 3x3 pad 1 -> + x -> y:
 * at the default level both become channels-last FusedConvs (oneDNN). */
static cge_graph *build(int64_t n_static)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("convnet", &g), CGE_OK);
    int64_t n = n_static > 0 ? n_static : cge_graph_dim_symbol(g, "batch");
    cge_shape xs = CGE_SHAPE(n, C, H, H), ws = CGE_SHAPE(C, C, 3, 3), bs = CGE_SHAPE(C);
    static float w1[C * C * 9], w2[C * C * 9], b1[C];
    for (int i = 0; i < C * C * 9; i++) {
        w1[i] = (float)((i * 7) % 11) * 0.05f - 0.25f;
        w2[i] = (float)((i * 5) % 13) * 0.04f - 0.24f;
    }
    for (int i = 0; i < C; i++)
        b1[i] = 0.03f * (float)i - 0.1f;
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w1", CGE_F32, &ws, w1, sizeof w1), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "b1", CGE_F32, &bs, b1, sizeof b1), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w2", CGE_F32, &ws, w2, sizeof w2), CGE_OK);
    const char *c1[] = {"x", "w1", "b1"}, *oc1[] = {"c1"}, *re[] = {"c1"}, *ore[] = {"r"};
    const char *c2[] = {"r", "w2"}, *oc2[] = {"c2"}, *ad[] = {"c2", "x"}, *oy[] = {"y"};
    int64_t pads[4] = {1, 1, 1, 1};
    cge_node *n1 = NULL, *n2 = NULL;
    assert_int_equal(cge_graph_add_node(g, "Conv", "", "conv1", c1, 3, oc1, 1, &n1), CGE_OK);
    assert_int_equal(cge_node_set_ints(n1, "pads", pads, 4), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Relu", "", "relu", re, 1, ore, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Conv", "", "conv2", c2, 2, oc2, 1, &n2), CGE_OK);
    assert_int_equal(cge_node_set_ints(n2, "pads", pads, 4), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "add", ad, 2, oy, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

static void run(cge_session *s, int64_t n, float *y)
{
    static float x[MAXN * C * H * H];
    for (int i = 0; i < MAXN * C * H * H; i++)
        x[i] = (float)((i * 5) % 9) * 0.125f - 0.5f;
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(n, C, H, H), .data = x,
                     .bytes = sizeof(float) * (size_t)(n * C * H * H)};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof(float) * MAXN * C * H * H};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
    assert_int_equal(out.shape.rank, 4);
    assert_int_equal(out.shape.dims[0], n);
}

static size_t arena_of(const cge_session *s)
{
    size_t b = 0;
    assert_int_equal(cge_session_arena_bytes(s, 1, &b), CGE_OK);
    return b;
}

static cge_session *session_of(cge_graph *g)
{
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    return s;
}

static void test_new_batches_make_each_convolution_once(void **state)
{
    (void)state;
    static const int64_t batches[] = {2, 1, 5, 3, 4, 6, 1, 3};
    const int nb = (int)(sizeof batches / sizeof batches[0]);
    bool dnnl = cge__dnnl_available() != 0;
    cge_session *s = session_of(build(0));
    /* Batch 1 is planned when the graph compiles (warm_first_signature, session.c):
     * its first run makes nothing. */
    bool seen[MAXN + 1] = {false, true};
    size_t largest = 0;
    int64_t maxn = 0, compiles = -1;
    for (int k = 0; k < nb; k++) {
        int64_t n = batches[k];
        static float y1[MAXN * C * H * H], y2[MAXN * C * H * H], y3[MAXN * C * H * H],
            want[MAXN * C * H * H];
        int64_t made0, q0, made1, q1;
        cge__dnnl_conv_counts(&made0, &q0);
        run(s, n, y1);   /* the signature's first run: a plan run */
        cge__dnnl_conv_counts(&made1, &q1);
        if (k == 0) {
            cge_session_graph_stats st0;
            assert_int_equal(cge_session_get_graph_stats(s, 1, &st0), CGE_OK);
            compiles = st0.compiles;
        }
        run(s, n, y2);   /* captured */
        run(s, n, y3);   /* replayed */
        if (dnnl && k > 0) {
            /* A new batch prepares each convolution once; its workspace
             * query made none (before, it made every one a second time). A
             * batch seen before makes nothing. */
            assert_int_equal(made1 - made0, seen[n] ? 0 : NCONV);
            assert_true(seen[n] ? q1 == q0 : q1 - q0 >= NCONV);
        }
        /* Bit-equal to the graph compiled for this batch alone (the same
         * kernels, the same weights' layout). */
        cge_session *r = session_of(build(n));
        run(r, n, want);
        cge_session_destroy(r);
        size_t bytes = sizeof(float) * (size_t)(n * C * H * H);
        assert_memory_equal(y1, want, bytes);
        assert_memory_equal(y2, want, bytes);
        assert_memory_equal(y3, want, bytes);
        /* A batch no larger than one seen before never grows the arena. */
        size_t arena = arena_of(s);
        if (n <= maxn)
            assert_int_equal(arena, largest);
        largest = arena > largest ? arena : largest;
        maxn = n > maxn ? n : maxn;
        seen[n] = true;
    }
    cge_session_graph_stats st;
    assert_int_equal(cge_session_get_graph_stats(s, 1, &st), CGE_OK);
    assert_true(st.shape_program);
    assert_int_equal(st.compiles, compiles);   /* only the first run's */
    assert_int_equal(st.specializations, 6);   /* distinct batches */
    cge_session_destroy(s);
}

/* Sizes already seen never grow the arena, whatever their order. */
static void test_arena_not_past_largest_seen(void **state)
{
    (void)state;
    cge_session *s = session_of(build(0));
    static float y[MAXN * C * H * H];
    run(s, MAXN, y);
    size_t top = arena_of(s);
    for (int64_t n = 1; n < MAXN; n++) {
        run(s, n, y);
        assert_int_equal(arena_of(s), top);
    }
    run(s, MAXN, y);
    assert_int_equal(arena_of(s), top);
    cge_session_destroy(s);
}

/* A net wide enough for oneDNN's per-image Winograd convolution (64
 * channels, 3x3, 16x16 outputs: conv.c's dnnl_winograd): x -> Conv + bias ->
 * Relu -> Conv -> + x. */
enum { WC = 64, WH = 16, WMAXN = 4 };

static cge_graph *build_wide(int64_t n_static)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("widenet", &g), CGE_OK);
    int64_t n = n_static > 0 ? n_static : cge_graph_dim_symbol(g, "batch");
    cge_shape xs = CGE_SHAPE(n, WC, WH, WH), ws = CGE_SHAPE(WC, WC, 3, 3), bs = CGE_SHAPE(WC);
    static float w1[WC * WC * 9], w2[WC * WC * 9], b1[WC];
    for (int i = 0; i < WC * WC * 9; i++) {
        w1[i] = (float)((i * 7) % 11) * 0.01f - 0.05f;
        w2[i] = (float)((i * 5) % 13) * 0.008f - 0.048f;
    }
    for (int i = 0; i < WC; i++)
        b1[i] = 0.003f * (float)i - 0.1f;
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w1", CGE_F32, &ws, w1, sizeof w1), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "b1", CGE_F32, &bs, b1, sizeof b1), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w2", CGE_F32, &ws, w2, sizeof w2), CGE_OK);
    const char *c1[] = {"x", "w1", "b1"}, *oc1[] = {"c1"}, *re[] = {"c1"}, *ore[] = {"r"};
    const char *c2[] = {"r", "w2"}, *oc2[] = {"c2"}, *ad[] = {"c2", "x"}, *oy[] = {"y"};
    int64_t pads[4] = {1, 1, 1, 1};
    cge_node *n1 = NULL, *n2 = NULL;
    assert_int_equal(cge_graph_add_node(g, "Conv", "", "conv1", c1, 3, oc1, 1, &n1), CGE_OK);
    assert_int_equal(cge_node_set_ints(n1, "pads", pads, 4), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Relu", "", "relu", re, 1, ore, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Conv", "", "conv2", c2, 2, oc2, 1, &n2), CGE_OK);
    assert_int_equal(cge_node_set_ints(n2, "pads", pads, 4), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "add", ad, 2, oy, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

static void run_wide(cge_session *s, int64_t n, float *y)
{
    static float x[WMAXN * WC * WH * WH];
    for (int i = 0; i < WMAXN * WC * WH * WH; i++)
        x[i] = (float)((i * 5) % 9) * 0.125f - 0.5f;
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(n, WC, WH, WH), .data = x,
                     .bytes = sizeof(float) * (size_t)(n * WC * WH * WH)};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof(float) * WMAXN * WC * WH * WH};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
    assert_int_equal(out.shape.dims[0], n);
}

/* Weights are reordered into oneDNN's layout once for every batch: the
 * batch-1 signature made at compile packs them, later batches share the
 * packed copies (the Winograd primitive is one image's, so its layout cannot
 * follow the batch). Each batch is bit-equal to a static compile of it, and
 * close to the direct convolution's result (on AVX2 machines, where oneDNN
 * has no Winograd, both sessions run the direct one). */
static void test_weights_packed_once_for_all_batches(void **state)
{
    (void)state;
    if (!cge__dnnl_available())
        skip();
    static const int64_t batches[] = {3, 1, 2, 4, 3, 1};
    const int nb = (int)(sizeof batches / sizeof batches[0]);
    int64_t reorders = 0, wino0 = cge__dnnl_conv_winograd_made(),
            blocked0 = cge__dnnl_conv_blocked8_made();
    int64_t r0 = cge__dnnl_weight_reorders();
    cge_session *s = session_of(build_wide(0));
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    reorders += cge__dnnl_weight_reorders() - r0;
    /* the batch-1 signature, made at compile, packed both weights */
    assert_int_equal(reorders, 2);
    cge_session_graph_stats st;
    assert_int_equal(cge_session_get_graph_stats(s, 1, &st), CGE_OK);
    size_t packed = st.packed_bytes;
    assert_true(packed > 0);
    for (int k = 0; k < nb; k++) {
        int64_t n = batches[k];
        static float y[WMAXN * WC * WH * WH], want[WMAXN * WC * WH * WH],
            direct[WMAXN * WC * WH * WH];
        r0 = cge__dnnl_weight_reorders();
        run_wide(s, n, y);
        run_wide(s, n, y);
        reorders += cge__dnnl_weight_reorders() - r0;
        assert_int_equal(cge_session_get_graph_stats(s, 1, &st), CGE_OK);
        assert_int_equal(st.packed_bytes, packed);
        cge_session *r = session_of(build_wide(n));
        run_wide(r, n, want);
        cge_session_destroy(r);
        size_t count = (size_t)(n * WC * WH * WH);
        assert_memory_equal(y, want, sizeof(float) * count);
        /* the direct convolution computes the same within rounding */
        setenv("CGE_DNNL_WINOGRAD", "0", 1);
        r = session_of(build_wide(n));
        run_wide(r, n, direct);
        cge_session_destroy(r);
        unsetenv("CGE_DNNL_WINOGRAD");
        for (size_t i = 0; i < count; i++)
            assert_float_equal(y[i], direct[i], 1e-4f * (1.0f + fabsf(direct[i])));
    }
    assert_int_equal(reorders, 2);
    /* Winograd is oneDNN 2.6's on AVX-512 only; AVX2 machines run the direct
     * kernel on nChw8c copies (conv.c, dnnl_blocked8), whose weights are
     * likewise packed once for every batch. */
    if (cge_cpu_features() & CGE_CPU_AVX512F)
        assert_true(cge__dnnl_conv_winograd_made() > wino0);
    else if (cge_cpu_features() & CGE_CPU_AVX2)
        assert_true(cge__dnnl_conv_blocked8_made() > blocked0);
    cge_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_batches_make_each_convolution_once),
        cmocka_unit_test(test_arena_not_past_largest_seen),
        cmocka_unit_test(test_weights_packed_once_for_all_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
