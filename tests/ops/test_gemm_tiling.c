/* The float32 GEMM's tile planning and its AVX-512 direct paths: a small
 * product is split evenly between the cores, every tiling covers C, and the
 * 12x32 direct kernel gives the same bits as the 12x16 one (tilings that use
 * one or the other agree exactly), with and without a bias, over several
 * depth slices; so does the one-row (GEMV) path. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/gemm_kernel.h"

/* Largest per-core share of C's elements over the mean share, with tiles
 * taken in order by the least-loaded core (as the pool hands out blocks). */
static double imbalance(const cge__gemm_tiling *t, int64_t M, int64_t N, int threads)
{
    int64_t load[8] = {0}, total = 0;
    for (int64_t tm = 0; tm < t->tiles_m; tm++)
        for (int64_t tn = 0; tn < t->tiles_n; tn++) {
            int64_t r = M - tm * t->mt < t->mt ? M - tm * t->mt : t->mt;
            int64_t c = N - tn * t->nt < t->nt ? N - tn * t->nt : t->nt;
            int best = 0;
            for (int k = 1; k < threads; k++)
                if (load[k] < load[best])
                    best = k;
            load[best] += r * c;
            total += r * c;
        }
    int64_t worst = 0;
    for (int k = 0; k < threads; k++)
        worst = load[k] > worst ? load[k] : worst;
    return (double)worst * threads / (double)total;
}

static void check_cover(const cge__gemm_tiling *t, int64_t M, int64_t N)
{
    assert_true(t->mt % CGE_GEMM_MT == 0 && t->nt % CGE_GEMM_NR == 0);
    assert_true(t->tiles_m * t->mt >= M && (t->tiles_m - 1) * t->mt < M);
    assert_true(t->tiles_n * t->nt >= N && (t->tiles_n - 1) * t->nt < N);
}

/* A transformer's projections at batch 1 (128 tokens, width 256) on two
 * cores: no core gets much more than half of C. Before the balancing, the
 * 128 x 256 products were cut into six 24-row tiles (72 rows to one core,
 * 56 to the other). */
static void test_small_products_balance(void **state)
{
    const int64_t shapes[][2] = {{128, 256}, {128, 768}, {128, 1024}, {128, 64}, {50, 224}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1];
        cge__gemm_tiling t;
        cge__gemm_plan(1, M, N, 2, &t);
        check_cover(&t, M, N);
        double r = imbalance(&t, M, N, 2);
        if (r > 1.05)
            fail_msg("%lld x %lld on 2 cores: tiles %lld x %lld of %lld x %lld, imbalance %.3f",
                     (long long)M, (long long)N, (long long)t.tiles_m, (long long)t.tiles_n,
                     (long long)t.mt, (long long)t.nt, r);
    }
}

/* Large or batched products keep covering C whatever the core count. */
static void test_plans_cover(void **state)
{
    const int64_t shapes[][3] = {{1, 1, 1},    {1, 7, 3},      {1, 3000, 40}, {4, 128, 128},
                                 {1, 512, 49}, {1, 64, 3136},  {2, 13, 17},   {1, 96, 4096}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int threads = 1; threads <= 16; threads *= 2) {
            cge__gemm_tiling t;
            cge__gemm_plan(shapes[s][0], shapes[s][1], shapes[s][2], threads, &t);
            check_cover(&t, shapes[s][1], shapes[s][2]);
        }
}

static void run_tiled(const cge__gemm_f32 *g, int64_t mt, int64_t nt)
{
    for (int64_t i = 0; i < g->M; i += mt)
        for (int64_t j = 0; j < g->N; j += nt)
            cge__gemm_f32_tile(g, i, i + mt, j, j + nt);
}

/* Operands of a direct-kernel test: A (M x K), B (K x N) packed into bp, a
 * bias row; values that do not round to each other's sums. */
static void fill(int64_t M, int64_t K, int64_t N, float *a, float *b, float *bias, float *bp)
{
    for (int64_t i = 0; i < M * K; i++)
        a[i] = (float)((i * 37 % 101) - 50) / 49.0f;
    for (int64_t i = 0; i < K * N; i++)
        b[i] = (float)((i * 53 % 97) - 48) / 47.0f;
    for (int64_t j = 0; j < N; j++)
        bias[j] = (float)j / 16.0f - 3.0f;
    cge__gemm_pack_b(b, N, 1, K, N, 0, (N + 15) / 16, bp);
}

/* Column tiles of one panel only reach the 12x16 direct kernel; whole-width
 * tiles pair panels in the 12x32 one. N = 7 panels + 5 columns also takes
 * the single-panel and edge paths; M = 12k + 8 the packed edge rows; K = 600
 * three depth slices (overwrite, then accumulate). */
static void test_direct_kernels_agree(void **state)
{
    /* A property of this CPU, not of the build: nothing here could run them. */
    if (!cge__gemm_isa_supported(CGE_GEMM_ISA_AVX512)) {
        print_message("skipped: this CPU has no AVX-512, so the direct kernels do not exist\n");
        skip();
    }
    const int64_t M = 44, N = 7 * 16 + 5, K = 600;
    float *a = malloc(sizeof(float) * (size_t)(M * K));
    float *b = malloc(sizeof(float) * (size_t)(K * N));
    float *bias = malloc(sizeof(float) * (size_t)N);
    float *bp = malloc(sizeof(float) * (size_t)cge__gemm_packed_b_floats(K, N));
    float *c1 = malloc(sizeof(float) * (size_t)(M * N));
    float *c2 = malloc(sizeof(float) * (size_t)(M * N));
    fill(M, K, N, a, b, bias, bp);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        cge__gemm_f32 g = {.M = M, .N = N, .K = K, .a = a, .a_rs = K, .a_cs = 1, .bp = bp,
                          .ldc = N, .alpha = 1.0f, .bias = with_bias ? bias : NULL,
                          .bias_rs = 0, .bias_cs = 1, .beta = with_bias ? 1.0f : 0.0f,
                          .isa = CGE_GEMM_ISA_AVX512};
        memset(c1, 0xff, sizeof(float) * (size_t)(M * N)); /* NaN: every element is written */
        memset(c2, 0xff, sizeof(float) * (size_t)(M * N));
        g.c = c1;
        run_tiled(&g, 12, 16);
        g.c = c2;
        run_tiled(&g, 48, 128);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                if (memcmp(&c1[i * N + j], &c2[i * N + j], sizeof(float)) != 0)
                    fail_msg("bias %d [%lld,%lld]: 12x16 gives %.9g, 12x32 %.9g", with_bias,
                             (long long)i, (long long)j, c1[i * N + j], c2[i * N + j]);
                double s = with_bias ? bias[j] : 0.0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)a[i * K + k] * b[k * N + j];
                if (!(fabs(c2[i * N + j] - s) <= 1e-4 * (1 + fabs(s))))
                    fail_msg("bias %d [%lld,%lld]: got %g, expected %g", with_bias, (long long)i,
                             (long long)j, c2[i * N + j], s);
            }
    }
    free(a);
    free(b);
    free(bias);
    free(bp);
    free(c1);
    free(c2);
}

/* One row of C on its own (an M=1 product: the GEMV path, eight panels at
 * a time) gives the bits that row gets inside a 12-row tile, at 1x1, prime
 * sizes, several depth slices and whole and partial panels, with and
 * without a bias; and the double-precision sum. */
static void test_gemv_rows_agree(void **state)
{
    if (!cge__gemm_isa_supported(CGE_GEMM_ISA_AVX512)) {
        print_message("skipped: this CPU has no AVX-512, so the direct kernels do not exist\n");
        skip();
    }
    const int64_t sizes[][2] = {{1, 1}, {7, 13}, {97, 131}, {256, 256}, {600, 17 * 16 + 3},
                                {256, 1000}, {1024, 256}, {3, 129}};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        const int64_t M = 12, K = sizes[z][0], N = sizes[z][1];
        float *a = malloc(sizeof(float) * (size_t)(M * K));
        float *b = malloc(sizeof(float) * (size_t)(K * N));
        float *bias = malloc(sizeof(float) * (size_t)N);
        float *bp = malloc(sizeof(float) * (size_t)cge__gemm_packed_b_floats(K, N));
        float *tile = malloc(sizeof(float) * (size_t)(M * N));
        float *row = malloc(sizeof(float) * (size_t)N);
        fill(M, K, N, a, b, bias, bp);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            cge__gemm_f32 g = {.M = M, .N = N, .K = K, .a = a, .a_rs = K, .a_cs = 1, .bp = bp,
                              .c = tile, .ldc = N, .alpha = 1.0f,
                              .bias = with_bias ? bias : NULL, .bias_rs = 0, .bias_cs = 1,
                              .beta = with_bias ? 1.0f : 0.0f, .isa = CGE_GEMM_ISA_AVX512};
            cge__gemm_f32_tile(&g, 0, M, 0, N);
            for (int64_t i = 0; i < M; i++) {
                cge__gemm_f32 r = g;
                r.M = 1;
                r.a = a + i * K;
                r.c = row;
                memset(row, 0xff, sizeof(float) * (size_t)N); /* NaN: every element is written */
                cge__gemm_f32_tile(&r, 0, 1, 0, N);
                for (int64_t j = 0; j < N; j++) {
                    if (memcmp(&row[j], &tile[i * N + j], sizeof(float)) != 0)
                        fail_msg("%lldx%lld bias %d [%lld,%lld]: alone %.9g, in a tile %.9g",
                                 (long long)K, (long long)N, with_bias, (long long)i,
                                 (long long)j, row[j], tile[i * N + j]);
                    double sum = with_bias ? bias[j] : 0.0;
                    for (int64_t k = 0; k < K; k++)
                        sum += (double)a[i * K + k] * b[k * N + j];
                    if (!(fabs(row[j] - sum) <= 1e-4 * (1 + fabs(sum))))
                        fail_msg("%lldx%lld [%lld,%lld]: got %g, expected %g", (long long)K,
                                 (long long)N, (long long)i, (long long)j, row[j], sum);
                }
            }
        }
        free(a);
        free(b);
        free(bias);
        free(bp);
        free(tile);
        free(row);
    }
}

/* The direct kernels on B where it is (row-major, unpacked, with a row
 * stride wider than N as a view would have) give the packed path's bits,
 * tile for tile: 1x1x1, primes, a 1-row tile, partial panels, several depth
 * slices, with and without a bias; and a tile that covers nothing. */
static void test_unpacked_b_agrees(void **state)
{
    if (!cge__gemm_isa_supported(CGE_GEMM_ISA_AVX512)) {
        print_message("skipped: this CPU has no AVX-512, so the direct kernels do not exist\n");
        skip();
    }
    const int64_t sizes[][3] = {{1, 1, 1}, {2, 1, 1}, {13, 7, 5}, {37, 64, 50}, {128, 64, 197},
                                {12, 300, 33}, {25, 97, 131}, {24, 600, 64}, {5, 16, 16}};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        const int64_t M = sizes[z][0], K = sizes[z][1], N = sizes[z][2], ldb = N + 3;
        float *a = malloc(sizeof(float) * (size_t)(M * K));
        float *b = malloc(sizeof(float) * (size_t)(K * N));
        float *bw = malloc(sizeof(float) * (size_t)(K * ldb));
        float *bias = malloc(sizeof(float) * (size_t)N);
        float *bp = malloc(sizeof(float) * (size_t)cge__gemm_packed_b_floats(K, N));
        float *c1 = malloc(sizeof(float) * (size_t)(M * N));
        float *c2 = malloc(sizeof(float) * (size_t)(M * N));
        fill(M, K, N, a, b, bias, bp);
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < ldb; j++)
                bw[k * ldb + j] = j < N ? b[k * N + j] : NAN; /* never read */
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            cge__gemm_f32 g = {.M = M, .N = N, .K = K, .a = a, .a_rs = K, .a_cs = 1, .bp = bp,
                              .ldc = N, .alpha = 1.0f, .bias = with_bias ? bias : NULL,
                              .bias_rs = 0, .bias_cs = 1, .beta = with_bias ? 1.0f : 0.0f,
                              .isa = CGE_GEMM_ISA_AVX512};
            memset(c1, 0xff, sizeof(float) * (size_t)(M * N));
            memset(c2, 0xff, sizeof(float) * (size_t)(M * N));
            g.c = c1;
            run_tiled(&g, 24, 32);
            g.c = c2;
            g.bp = NULL;
            /* the same tiles, and one past the end that must write nothing */
            for (int64_t i0 = 0; i0 < M + 24; i0 += 24)
                for (int64_t j0 = 0; j0 < N; j0 += 32)
                    assert_int_equal(
                        cge__gemm_f32_tile_unpacked(&g, bw, ldb, i0, i0 + 24, j0, j0 + 32), 1);
            for (int64_t e = 0; e < M * N; e++)
                if (memcmp(&c1[e], &c2[e], sizeof(float)) != 0)
                    fail_msg("%lldx%lldx%lld bias %d [%lld,%lld]: packed %.9g, unpacked %.9g",
                             (long long)M, (long long)K, (long long)N, with_bias,
                             (long long)(e / N), (long long)(e % N), c1[e], c2[e]);
        }
        /* where only the packed path can: nothing computed, 0 returned */
        cge__gemm_f32 h = {.M = M, .N = N, .K = K, .a = a, .a_rs = K, .a_cs = 1, .c = c2,
                          .ldc = N, .alpha = 2.0f, .isa = CGE_GEMM_ISA_AVX512};
        assert_int_equal(cge__gemm_f32_tile_unpacked(&h, bw, ldb, 0, M, 0, N), 0);
        free(a);
        free(b);
        free(bw);
        free(bias);
        free(bp);
        free(c1);
        free(c2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_products_balance),
        cmocka_unit_test(test_plans_cover),
        cmocka_unit_test(test_direct_kernels_agree),
        cmocka_unit_test(test_gemv_rows_agree),
        cmocka_unit_test(test_unpacked_b_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
