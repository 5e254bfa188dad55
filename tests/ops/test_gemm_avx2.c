/* The float32 GEMM's AVX2 + FMA direct paths (A read in place, the 6x16
 * tiles and their edges, the one-row GEMV kernel, B packed or where it is),
 * chosen through the explicit isa field so that an AVX-512 machine runs them
 * too: against a float64 sum at 1, primes, multiples of the 6x16 tile and of
 * the depth slice plus and minus one, and empty products; and bit for bit
 * against the AVX2 packed path (A transposed, which only packing reads), so
 * that every tiling, the one-row path and an unpacked B give the same bits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/gemm_kernel.h"

static int have_avx2(void)
{
    if (cge__gemm_isa_supported(CGE_GEMM_ISA_AVX2))
        return 1;
    print_message("skipped: this CPU has no AVX2 + FMA\n");
    return 0;
}

/* The operands of one product: A row-major and transposed, B row-major, in
 * a view with a row stride wider than N (the columns past N NaN, never
 * read), and packed; a bias row. Values whose products do not round to each
 * other's sums. */
typedef struct operands {
    int64_t M, K, N, ldb;
    float *a, *at, *b, *bw, *bp, *bias;
} operands;

static float *alloc_floats(int64_t n)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(p);
    return p;
}

static void make(operands *o, int64_t M, int64_t K, int64_t N)
{
    o->M = M;
    o->K = K;
    o->N = N;
    o->ldb = N + 3;
    o->a = alloc_floats(M * K);
    o->at = alloc_floats(M * K);
    o->b = alloc_floats(K * N);
    o->bw = alloc_floats(K * o->ldb);
    o->bp = alloc_floats(cge__gemm_packed_b_floats(K, N));
    o->bias = alloc_floats(N);
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < K; k++) {
            float v = (float)(((i * K + k) * 37 % 101) - 50) / 49.0f;
            o->a[i * K + k] = v;
            o->at[k * M + i] = v;
        }
    for (int64_t e = 0; e < K * N; e++)
        o->b[e] = (float)((e * 53 % 97) - 48) / 47.0f;
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < o->ldb; j++)
            o->bw[k * o->ldb + j] = j < N ? o->b[k * N + j] : NAN;
    for (int64_t j = 0; j < N; j++)
        o->bias[j] = (float)j / 16.0f - 3.0f;
    cge__gemm_pack_b(o->b, N, 1, K, N, 0, (N + 15) / 16, o->bp);
}

static void release(operands *o)
{
    free(o->a);
    free(o->at);
    free(o->b);
    free(o->bw);
    free(o->bp);
    free(o->bias);
}

static cge__gemm_f32 problem(const operands *o, float *c, int with_bias, int transposed_a)
{
    return (cge__gemm_f32){.M = o->M, .N = o->N, .K = o->K,
                           .a = transposed_a ? o->at : o->a,
                           .a_rs = transposed_a ? 1 : o->K, .a_cs = transposed_a ? o->M : 1,
                           .bp = o->bp, .c = c, .ldc = o->N, .alpha = 1.0f,
                           .bias = with_bias ? o->bias : NULL, .bias_rs = 0, .bias_cs = 1,
                           .beta = with_bias ? 1.0f : 0.0f, .isa = CGE_GEMM_ISA_AVX2};
}

static void run_tiled(const cge__gemm_f32 *g, int64_t mt, int64_t nt)
{
    for (int64_t i = 0; i < g->M; i += mt)
        for (int64_t j = 0; j < g->N; j += nt)
            cge__gemm_f32_tile(g, i, i + mt, j, j + nt);
}

static void expect_same_bits(const operands *o, const float *want, const float *got,
                             const char *what, int with_bias)
{
    for (int64_t e = 0; e < o->M * o->N; e++)
        if (memcmp(&want[e], &got[e], sizeof(float)) != 0)
            fail_msg("%lldx%lldx%lld bias %d [%lld,%lld]: packed %.9g, %s %.9g", (long long)o->M,
                     (long long)o->K, (long long)o->N, with_bias, (long long)(e / o->N),
                     (long long)(e % o->N), want[e], what, got[e]);
}

static void expect_reference(const operands *o, const float *c, int with_bias)
{
    for (int64_t i = 0; i < o->M; i++)
        for (int64_t j = 0; j < o->N; j++) {
            double s = with_bias ? o->bias[j] : 0.0;
            for (int64_t k = 0; k < o->K; k++)
                s += (double)o->a[i * o->K + k] * o->b[k * o->N + j];
            float v = c[i * o->N + j];
            if (!(fabs(v - s) <= 1e-4 * (1 + fabs(s))))
                fail_msg("%lldx%lldx%lld bias %d [%lld,%lld]: got %g, expected %g",
                         (long long)o->M, (long long)o->K, (long long)o->N, with_bias,
                         (long long)i, (long long)j, v, s);
        }
}

static const int64_t shapes[][3] = {
    {1, 1, 1},     {1, 7, 3},      {2, 5, 17},     {5, 13, 15},    {6, 16, 16},
    {7, 31, 33},   {11, 255, 47},  {13, 257, 97},  {12, 256, 32},  {17, 1, 113},
    {23, 513, 95}, {37, 64, 50},   {1, 600, 1000}, {1, 1280, 97},  {64, 64, 64},
    {97, 131, 161}, {128, 64, 197}, {0, 5, 7},     {4, 0, 9},      {3, 8, 0},
};

/* The direct tiles (and, for one row, the GEMV kernel) against the packed
 * path's bits and the float64 sum, at several tilings: whole, 6x16, 12x32,
 * and a tile of 30 rows x 48 columns that leaves edges inside the product. */
static void test_direct_matches_packed(void **state)
{
    if (!have_avx2())
        skip();
    for (size_t z = 0; z < sizeof shapes / sizeof shapes[0]; z++) {
        operands o;
        make(&o, shapes[z][0], shapes[z][1], shapes[z][2]);
        float *want = alloc_floats(o.M * o.N), *got = alloc_floats(o.M * o.N);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            memset(want, 0xff, sizeof(float) * (size_t)(o.M * o.N)); /* NaN: all written */
            cge__gemm_f32 p = problem(&o, want, with_bias, 1);
            run_tiled(&p, 12, 32);
            expect_reference(&o, want, with_bias);
            const int64_t tilings[][2] = {{1 << 20, 1 << 20}, {6, 16}, {12, 32}, {30, 48}, {1, 16}};
            for (size_t t = 0; t < sizeof tilings / sizeof tilings[0]; t++) {
                memset(got, 0xff, sizeof(float) * (size_t)(o.M * o.N));
                cge__gemm_f32 d = problem(&o, got, with_bias, 0);
                run_tiled(&d, tilings[t][0], tilings[t][1]);
                expect_same_bits(&o, want, got, "direct", with_bias);
            }
        }
        free(want);
        free(got);
        release(&o);
    }
}

/* B where it is (row stride N + 3, NaN past N): the packed path's bits,
 * tile for tile and for one-row products; a tile past the end writes
 * nothing; alpha != 1 leaves it to the packed path (0, nothing computed). */
static void test_unpacked_b_matches_packed(void **state)
{
    if (!have_avx2())
        skip();
    for (size_t z = 0; z < sizeof shapes / sizeof shapes[0]; z++) {
        operands o;
        make(&o, shapes[z][0], shapes[z][1], shapes[z][2]);
        if (o.K == 0) { /* the unpacked paths need a depth; K = 0 is the caller's */
            release(&o);
            continue;
        }
        float *want = alloc_floats(o.M * o.N), *got = alloc_floats(o.M * o.N);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            memset(want, 0xff, sizeof(float) * (size_t)(o.M * o.N));
            cge__gemm_f32 p = problem(&o, want, with_bias, 1);
            run_tiled(&p, 24, 32);
            memset(got, 0xff, sizeof(float) * (size_t)(o.M * o.N));
            cge__gemm_f32 u = problem(&o, got, with_bias, 0);
            u.bp = NULL;
            for (int64_t i0 = 0; i0 < o.M + 24; i0 += 24)
                for (int64_t j0 = 0; j0 < o.N; j0 += 32)
                    assert_int_equal(
                        cge__gemm_f32_tile_unpacked(&u, o.bw, o.ldb, i0, i0 + 24, j0, j0 + 32), 1);
            expect_same_bits(&o, want, got, "unpacked", with_bias);
            /* one row at a time: the GEMV kernel on B where it is */
            memset(got, 0xff, sizeof(float) * (size_t)(o.M * o.N));
            for (int64_t i = 0; i < o.M; i++) {
                cge__gemm_f32 r = problem(&o, got + i * o.N, with_bias, 0);
                r.M = 1;
                r.a = o.a + i * o.K;
                r.bp = NULL;
                assert_int_equal(cge__gemv_f32_unpacked(&r, o.bw, o.ldb, 0, o.N), 1);
            }
            expect_same_bits(&o, want, got, "unpacked row", with_bias);
        }
        cge__gemm_f32 h = problem(&o, got, 0, 0);
        h.alpha = 2.0f;
        assert_int_equal(cge__gemm_f32_tile_unpacked(&h, o.bw, o.ldb, 0, o.M, 0, o.N), 0);
        free(want);
        free(got);
        release(&o);
    }
}

/* The generic isa still refuses the unpacked paths, and a strided A, alpha
 * or a full bias matrix keep the AVX2 packed path (its numbers checked). */
static void test_packed_cases_stay_packed(void **state)
{
    if (!have_avx2())
        skip();
    operands o;
    make(&o, 13, 300, 37);
    float *c = alloc_floats(o.M * o.N);
    cge__gemm_f32 g = problem(&o, c, 0, 0);
    g.isa = CGE_GEMM_ISA_GENERIC;
    assert_int_equal(cge__gemm_f32_tile_unpacked(&g, o.bw, o.ldb, 0, o.M, 0, o.N), 0);
    g = problem(&o, c, 0, 0);
    g.alpha = 0.5f;
    memset(c, 0xff, sizeof(float) * (size_t)(o.M * o.N));
    run_tiled(&g, 12, 16);
    for (int64_t i = 0; i < o.M; i++)
        for (int64_t j = 0; j < o.N; j++) {
            double s = 0.0;
            for (int64_t k = 0; k < o.K; k++)
                s += (double)o.a[i * o.K + k] * o.b[k * o.N + j];
            assert_true(fabs(c[i * o.N + j] - 0.5 * s) <= 1e-4 * (1 + fabs(s)));
        }
    free(c);
    release(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_matches_packed),
        cmocka_unit_test(test_unpacked_b_matches_packed),
        cmocka_unit_test(test_packed_cases_stay_packed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
