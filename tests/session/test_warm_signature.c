/* A symbolic graph without convolutions gets its size-1 signature planned at
 * compile (warm_first_signature, session.c): its weights are packed before
 * the first run, whatever dims are symbolic (here a sequence length), later
 * sizes share that packing, and results equal a static compile of each size.
 * A convolution net whose symbolic dim is not the batch is left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

enum { D = 64, MAXS = 37 };

/* x [1, seq, 64] -> MatMul W [64, 64] -> + b -> Relu -> y */
static cge_graph *build_matmul(int64_t seq_static)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("seqnet", &g), CGE_OK);
    int64_t seq = seq_static > 0 ? seq_static : cge_graph_dim_symbol(g, "seq");
    cge_shape xs = CGE_SHAPE(1, seq, D), ws = CGE_SHAPE(D, D), bs = CGE_SHAPE(D);
    static float w[D * D], b[D];
    for (int i = 0; i < D * D; i++)
        w[i] = (float)((i * 7) % 13) * 0.01f - 0.06f;
    for (int i = 0; i < D; i++)
        b[i] = 0.002f * (float)i - 0.05f;
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, w, sizeof w), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "b", CGE_F32, &bs, b, sizeof b), CGE_OK);
    const char *mm[] = {"x", "w"}, *omm[] = {"m"}, *ad[] = {"m", "b"}, *oad[] = {"a"};
    const char *re[] = {"a"}, *ore[] = {"y"};
    assert_int_equal(cge_graph_add_node(g, "MatMul", "", "mm", mm, 2, omm, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "add", ad, 2, oad, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Relu", "", "relu", re, 1, ore, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

/* x [1, 4, h, h] -> Conv 3x3 pad 1 -> y, h symbolic */
static cge_graph *build_conv_spatial(void)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("convnet", &g), CGE_OK);
    int64_t h = cge_graph_dim_symbol(g, "h");
    cge_shape xs = CGE_SHAPE(1, 4, h, h), ws = CGE_SHAPE(4, 4, 3, 3);
    static float w[4 * 4 * 9];
    for (int i = 0; i < 4 * 4 * 9; i++)
        w[i] = (float)(i % 5) * 0.1f - 0.2f;
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, w, sizeof w), CGE_OK);
    const char *c[] = {"x", "w"}, *oc[] = {"y"};
    int64_t pads[4] = {1, 1, 1, 1};
    cge_node *n = NULL;
    assert_int_equal(cge_graph_add_node(g, "Conv", "", "conv", c, 2, oc, 1, &n), CGE_OK);
    assert_int_equal(cge_node_set_ints(n, "pads", pads, 4), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

static cge_session *session_of(cge_graph *g)
{
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    return s;
}

static void run(cge_session *s, int64_t seq, float *y)
{
    static float x[MAXS * D];
    for (int i = 0; i < MAXS * D; i++)
        x[i] = (float)((i * 5) % 9) * 0.125f - 0.5f;
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(1, seq, D), .data = x,
                     .bytes = sizeof(float) * (size_t)(seq * D)};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof(float) * MAXS * D};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
    assert_int_equal(out.shape.dims[1], seq);
}

static cge_session_graph_stats stats_of(const cge_session *s)
{
    cge_session_graph_stats st;
    assert_int_equal(cge_session_get_graph_stats(s, 1, &st), CGE_OK);
    return st;
}

static void test_sequence_graph_packs_at_compile(void **state)
{
    (void)state;
    cge_session *s = session_of(build_matmul(0));
    cge_session_graph_stats st = stats_of(s);
    /* the size-1 signature was planned at compile, and the weight packed there */
    assert_int_equal(st.specializations, 1);
    size_t packed = st.packed_bytes;
    assert_true(packed > 0);
    static const int64_t seqs[] = {1, 16, 37, 5, 16};
    for (size_t k = 0; k < sizeof seqs / sizeof seqs[0]; k++) {
        static float y[MAXS * D], want[MAXS * D];
        run(s, seqs[k], y);
        assert_int_equal(stats_of(s).packed_bytes, packed);   /* shared, not packed again */
        cge_session *r = session_of(build_matmul(seqs[k]));
        run(r, seqs[k], want);
        cge_session_destroy(r);
        assert_memory_equal(y, want, sizeof(float) * (size_t)(seqs[k] * D));
    }
    /* sizes 1 (made at compile), 16, 37, 5 */
    assert_int_equal(stats_of(s).specializations, 4);
    cge_session_destroy(s);
}

static void test_switch_turns_it_off(void **state)
{
    (void)state;
    setenv("CGE_WARM_BATCH", "0", 1);
    cge_session *s = session_of(build_matmul(0));
    unsetenv("CGE_WARM_BATCH");
    cge_session_graph_stats st = stats_of(s);
    assert_int_equal(st.specializations, 0);
    assert_int_equal(st.packed_bytes, 0);
    cge_session_destroy(s);
}

static void test_spatial_conv_dims_are_left_alone(void **state)
{
    (void)state;
    cge_session *s = session_of(build_conv_spatial());
    assert_int_equal(stats_of(s).specializations, 0);
    cge_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequence_graph_packs_at_compile),
        cmocka_unit_test(test_switch_turns_it_off),
        cmocka_unit_test(test_spatial_conv_dims_are_left_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
