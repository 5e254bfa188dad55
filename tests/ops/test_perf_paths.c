/* Tests of the fast paths added for the model benchmarks: the GEMM's
 * unpacked-A tiles (same bits as the packed path) and Gemm's workspace,
 * asked before any data exists. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/op.h"
#include "ops/gemm_kernel.h"

static float *rnd(int64_t n, uint32_t seed)
{
    float *d = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        d[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
    return d;
}

static void run_tiles(const cge__gemm_f32 *g)
{
    cge__gemm_tiling tl;
    cge__gemm_plan(1, g->M, g->N, 2, &tl);
    for (int64_t tm = 0; tm < tl.tiles_m; tm++)
        for (int64_t tn = 0; tn < tl.tiles_n; tn++)
            cge__gemm_f32_tile(g, tm * tl.mt, (tm + 1) * tl.mt, tn * tl.nt, (tn + 1) * tl.nt);
}

/* Row-major A (unit column stride) takes the unpacked path on AVX-512; the
 * same A transposed (column stride M) is packed. Both must give the same
 * bits, with and without a row bias, over ragged edges and several K
 * passes. On other CPUs both take the packed path and agree trivially. */
static void test_gemm_unpacked_a_same_bits(void **state)
{
    const int64_t dims[][3] = {{128, 256, 1024}, {37, 50, 300}, {12, 16, 5}, {100, 33, 513},
                               {1, 17, 3}, {24, 48, 256}};
    for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++) {
        int64_t M = dims[t][0], N = dims[t][1], K = dims[t][2];
        float *a = rnd(M * K, 1), *b = rnd(K * N, 2), *bias = rnd(N, 3);
        float *at = malloc(sizeof(float) * (size_t)(M * K));
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++)
                at[k * M + i] = a[i * K + k];
        float *bp = aligned_alloc(64, (size_t)cge__gemm_packed_b_floats(K, N) * sizeof(float));
        float *c1 = malloc(sizeof(float) * (size_t)(M * N)), *c2 = malloc(sizeof(float) * (size_t)(M * N));
        cge__gemm_pack_b(b, N, 1, K, N, 0, (N + 15) / 16, bp);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            for (int64_t i = 0; i < M * N; i++)
                c1[i] = c2[i] = NAN; /* overwritten, never read */
            cge__gemm_f32 g = {.M = M, .N = N, .K = K, .a = a, .a_rs = K, .a_cs = 1, .bp = bp,
                              .c = c1, .ldc = N, .alpha = 1.0f,
                              .bias = with_bias ? bias : NULL, .bias_rs = 0, .bias_cs = 1,
                              .beta = 1.0f};
            run_tiles(&g);
            g.a = at;
            g.a_rs = 1;
            g.a_cs = M;
            g.c = c2;
            run_tiles(&g);
            if (memcmp(c1, c2, sizeof(float) * (size_t)(M * N)))
                fail_msg("%lldx%lldx%lld bias %d: unpacked and packed A differ", (long long)M,
                         (long long)N, (long long)K, with_bias);
            /* And both are the product. */
            for (int64_t i = 0; i < M; i += 7)
                for (int64_t j = 0; j < N; j += 5) {
                    double s = with_bias ? bias[j] : 0.0;
                    for (int64_t k = 0; k < K; k++)
                        s += (double)a[i * K + k] * b[k * N + j];
                    assert_true(fabs(c1[i * N + j] - s) <= 1e-4 * (1 + fabs(s)));
                }
        }
        free(a), free(b), free(bias), free(at), free(bp), free(c1), free(c2);
    }
}

/* Plans ask for workspace with no data bound: a Gemm with a bias input must
 * still get its packing space (it used to get none and fall back to the
 * slow row loop on every run). */
static void test_gemm_workspace_without_data(void **state)
{
    const cge_op_def *def = cge_op_find("", "Gemm", 0);
    assert_non_null(def);
    const cge_kernel_def *k = cge_op_find_kernel(def, "cpu", CGE_F32);
    assert_non_null(k);
    assert_non_null(k->workspace_size);
    cge_tensor ins[3] = {
        {.name = "a", .dtype = CGE_F32, .shape = CGE_SHAPE(128, 256)},
        {.name = "b", .dtype = CGE_F32, .shape = CGE_SHAPE(64, 256)},
        {.name = "c", .dtype = CGE_F32, .shape = CGE_SHAPE(64)},
    };
    cge_tensor outs[1] = {{.name = "y", .dtype = CGE_F32, .shape = CGE_SHAPE(128, 64)}};
    /* The attributes of a node: transB = 1. */
    cge_graph *gr = NULL;
    cge_node *n = NULL;
    const char *gin[3] = {"a", "b", "c"}, *gout[1] = {"y"};
    assert_int_equal(cge_graph_create("gemm_ws", &gr), CGE_OK);
    assert_int_equal(cge_graph_add_node(gr, "Gemm", "", "g", gin, 3, gout, 1, &n), CGE_OK);
    assert_int_equal(cge_node_set_int(n, "transB", 1), CGE_OK);
    const cge_attrs *at = cge_node_attrs_const(n);
    cge_kernel_ctx ctx = {.op_type = "Gemm", .node_name = "g", .num_inputs = 3, .inputs = ins,
                          .num_outputs = 1, .outputs = outs, .attrs = at, .num_threads = 2};
    size_t ws = k->workspace_size(&ctx);
    assert_true(ws >= (size_t)cge__gemm_packed_b_floats(256, 64) * sizeof(float));
    cge_graph_destroy(gr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_unpacked_a_same_bits),
        cmocka_unit_test(test_gemm_workspace_without_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
