/* Tests of MatMul and Gemm against numpy references (matmul_fixtures.h), hand
 * values and a float64 loop, and of each float32 GEMM micro-kernel directly. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "matmul_fixtures.h"
#include "op_runner.h"
#include "ops/gemm_kernel.h"

/* The inputs formula shared with gen_mm_fixtures.py. */
static double vgen(int64_t i, int seed)
{
    return (double)((i * 37 + seed * 11) % 101) / 50.0 - 1.0;
}

static float *new_f32(cge_shape s, int seed)
{
    int64_t n = cge_shape_numel(&s);
    float *d = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        d[i] = (float)vgen(i, seed);
    return d;
}

static double *new_f64(cge_shape s, int seed)
{
    int64_t n = cge_shape_numel(&s);
    double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        d[i] = vgen(i, seed);
    return d;
}

static cge_tensor run(const char *op, const cge_tensor *in, int32_t nin, const cge_attr *attrs,
                      int32_t nattrs)
{
    cge_tensor out[1];
    if (op_run(op, in, nin, attrs, nattrs, out, 1) != CGE_OK)
        fail_msg("%s failed: %s", op, cge_last_error());
    return out[0];
}

static cge_attr attr_f(const char *name, float f)
{
    return (cge_attr){.name = name, .kind = CGE_ATTR_FLOAT, .f = f};
}

static cge_attr attr_i(const char *name, int64_t i)
{
    return (cge_attr){.name = name, .kind = CGE_ATTR_INT, .i = i};
}

/* float32 MatMul of formula inputs against a fixture. */
static void check_mm_f32(cge_shape as, int sa, cge_shape bs, int sb, cge_shape ys,
                         const float *want, double tol)
{
    float *a = new_f32(as, sa), *b = new_f32(bs, sb);
    cge_tensor in[2] = {op_tensor(CGE_F32, as, a), op_tensor(CGE_F32, bs, b)};
    cge_tensor y = run("MatMul", in, 2, NULL, 0);
    op_assert_close(&y, CGE_F32, ys, want, tol, tol);
    op_free_outputs(&y, 1);
    free(a);
    free(b);
}

/* ---- MatMul ------------------------------------------------------------------ */

static void test_mm_batched_ragged(void **state)
{
    /* K = 300 takes two depth passes; M = 29 and N = 21 leave partial tiles. */
    check_mm_f32(CGE_SHAPE(2, 1, 29, 300), 1, CGE_SHAPE(3, 300, 21), 2, CGE_SHAPE(2, 3, 29, 21),
                 mm_big_y, 1e-4);
}

static void test_mm_broadcast(void **state)
{
    check_mm_f32(CGE_SHAPE(2, 1, 3, 4), 3, CGE_SHAPE(5, 4, 6), 4, CGE_SHAPE(2, 5, 3, 6), mm_bc_y,
                 1e-5);
    /* One B for every batch: rows of all batches are multiplied at once. */
    check_mm_f32(CGE_SHAPE(3, 10, 20), 5, CGE_SHAPE(20, 33), 6, CGE_SHAPE(3, 10, 33), mm_fold_y,
                 1e-5);
}

static void test_mm_vectors(void **state)
{
    check_mm_f32(CGE_SHAPE(5), 7, CGE_SHAPE(2, 5, 3), 8, CGE_SHAPE(2, 3), mm_vec_l_y, 1e-5);
    check_mm_f32(CGE_SHAPE(2, 4, 5), 9, CGE_SHAPE(5), 10, CGE_SHAPE(2, 4), mm_vec_r_y, 1e-5);
    check_mm_f32(CGE_SHAPE(6), 11, CGE_SHAPE(6), 12, CGE_SCALAR, mm_dot_y, 1e-5);
}

/* Large enough for many tiles and blocks; checked against a float64 loop.
 * Attention's products (B read where it is: up to 64K floats a matrix) and
 * one whose B is past that (packed per run), both with partial tiles. */
static void test_mm_large_vs_loop(void **state)
{
    const int64_t shapes[][4] = {{2, 130, 517, 70}, {4, 128, 64, 128}, {4, 128, 128, 64},
                                 {3, 197, 64, 197}, {2, 20, 300, 300}, {1, 2, 1, 1}};
    for (size_t z = 0; z < sizeof shapes / sizeof shapes[0]; z++) {
        const int64_t B = shapes[z][0], M = shapes[z][1], K = shapes[z][2], N = shapes[z][3];
        float *a = new_f32(CGE_SHAPE(B, M, K), 50), *b = new_f32(CGE_SHAPE(B, K, N), 51);
        cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(B, M, K), a),
                            op_tensor(CGE_F32, CGE_SHAPE(B, K, N), b)};
        cge_tensor y = run("MatMul", in, 2, NULL, 0);
        op_assert_shape(&y, CGE_SHAPE(B, M, N));
        const float *yd = y.data;
        for (int64_t t = 0; t < B; t++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++)
                        s += (double)a[(t * M + i) * K + k] * b[(t * K + k) * N + j];
                    double got = yd[(t * M + i) * N + j];
                    if (fabs(got - s) > 1e-4 * (1 + fabs(s)))
                        fail_msg("%lldx%lldx%lldx%lld [%lld,%lld,%lld]: got %g, expected %g",
                                 (long long)B, (long long)M, (long long)K, (long long)N,
                                 (long long)t, (long long)i, (long long)j, got, s);
                }
        op_free_outputs(&y, 1);
        free(a);
        free(b);
    }
}

/* M = 1 (a decoding step's products: the GEMV path) at 1x1, prime sizes,
 * the decoder's shapes and a batch of single rows, against a float64 loop;
 * and the empty cases: N = 0, K = 0 (zeros). */
static void test_mm_single_row(void **state)
{
    const int64_t shapes[][3] = {{1, 1, 1}, {1, 97, 131}, {1, 13, 7}, {1, 256, 1000},
                                 {1, 1024, 256}, {3, 256, 257}};
    for (size_t z = 0; z < sizeof shapes / sizeof shapes[0]; z++) {
        const int64_t B = shapes[z][0], K = shapes[z][1], N = shapes[z][2];
        float *a = new_f32(CGE_SHAPE(B, 1, K), 60), *b = new_f32(CGE_SHAPE(K, N), 61);
        cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(B, 1, K), a),
                            op_tensor(CGE_F32, CGE_SHAPE(K, N), b)};
        cge_tensor y = run("MatMul", in, 2, NULL, 0);
        op_assert_shape(&y, CGE_SHAPE(B, 1, N));
        const float *yd = y.data;
        for (int64_t t = 0; t < B; t++)
            for (int64_t j = 0; j < N; j++) {
                double sum = 0;
                for (int64_t k = 0; k < K; k++)
                    sum += (double)a[t * K + k] * b[k * N + j];
                if (fabs(yd[t * N + j] - sum) > 1e-4 * (1 + fabs(sum)))
                    fail_msg("%lldx%lldx%lld [%lld,%lld]: got %g, expected %g", (long long)B,
                             (long long)K, (long long)N, (long long)t, (long long)j,
                             yd[t * N + j], sum);
            }
        op_free_outputs(&y, 1);
        free(a);
        free(b);
    }
    /* Attention's shape: one query row per head against that head's keys (B
     * read in place, unpacked) gives the bits of the same row in a two-row
     * product (B packed). */
    const int64_t H = 4, K = 64, N = 131;
    float *q = new_f32(CGE_SHAPE(H, 2, K), 62), *kv = new_f32(CGE_SHAPE(H, K, N), 63);
    float *q1 = malloc(sizeof(float) * (size_t)(H * K));
    for (int64_t h = 0; h < H; h++)
        memcpy(q1 + h * K, q + h * 2 * K, sizeof(float) * (size_t)K);
    cge_tensor one[2] = {op_tensor(CGE_F32, CGE_SHAPE(H, 1, K), q1),
                         op_tensor(CGE_F32, CGE_SHAPE(H, K, N), kv)};
    cge_tensor two[2] = {op_tensor(CGE_F32, CGE_SHAPE(H, 2, K), q),
                         op_tensor(CGE_F32, CGE_SHAPE(H, K, N), kv)};
    cge_tensor y1 = run("MatMul", one, 2, NULL, 0), y2 = run("MatMul", two, 2, NULL, 0);
    for (int64_t h = 0; h < H; h++)
        if (memcmp((float *)y1.data + h * N, (float *)y2.data + h * 2 * N,
                   sizeof(float) * (size_t)N) != 0)
            fail_msg("head %lld: the one-row product differs from row 0 of the two-row one",
                     (long long)h);
    op_free_outputs(&y1, 1);
    op_free_outputs(&y2, 1);
    free(q);
    free(q1);
    free(kv);

    float dummy[8] = {0};
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(1, 5), dummy),
                        op_tensor(CGE_F32, CGE_SHAPE(5, 0), dummy)};
    cge_tensor y = run("MatMul", in, 2, NULL, 0);
    op_assert_shape(&y, CGE_SHAPE(1, 0));
    op_free_outputs(&y, 1);
    const float zeros[7] = {0};
    in[0] = op_tensor(CGE_F32, CGE_SHAPE(1, 0), dummy);
    in[1] = op_tensor(CGE_F32, CGE_SHAPE(0, 7), dummy);
    y = run("MatMul", in, 2, NULL, 0);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(1, 7), zeros);
    op_free_outputs(&y, 1);
}

static void test_mm_f64(void **state)
{
    double *a = new_f64(CGE_SHAPE(3, 4), 13), *b = new_f64(CGE_SHAPE(2, 4, 5), 14);
    cge_tensor in[2] = {op_tensor(CGE_F64, CGE_SHAPE(3, 4), a),
                        op_tensor(CGE_F64, CGE_SHAPE(2, 4, 5), b)};
    cge_tensor y = run("MatMul", in, 2, NULL, 0);
    op_assert_close(&y, CGE_F64, CGE_SHAPE(2, 3, 5), mm_f64_y, 1e-12, 1e-12);
    op_free_outputs(&y, 1);
    free(a);
    free(b);
}

static void test_mm_half(void **state)
{
    cge_tensor in[2] = {op_tensor(CGE_F16, CGE_SHAPE(3, 5), mm_f16_a),
                        op_tensor(CGE_F16, CGE_SHAPE(5, 4), mm_f16_b)};
    cge_tensor y = run("MatMul", in, 2, NULL, 0);
    op_assert_close(&y, CGE_F16, CGE_SHAPE(3, 4), mm_f16_y, 2e-3, 2e-3);
    op_free_outputs(&y, 1);

    /* bfloat16: small values whose products and sums are exact. */
    const float af[4] = {1, 2, 3, 4}, bf[4] = {1, 0.5f, 2, -1}, yf[4] = {5, -1.5f, 11, -2.5f};
    uint16_t a[4], b[4], want[4];
    for (int i = 0; i < 4; i++) {
        a[i] = cge_f32_to_bf16(af[i]);
        b[i] = cge_f32_to_bf16(bf[i]);
        want[i] = cge_f32_to_bf16(yf[i]);
    }
    cge_tensor in2[2] = {op_tensor(CGE_BF16, CGE_SHAPE(2, 2), a),
                         op_tensor(CGE_BF16, CGE_SHAPE(2, 2), b)};
    y = run("MatMul", in2, 2, NULL, 0);
    op_assert_equal(&y, CGE_BF16, CGE_SHAPE(2, 2), want);
    op_free_outputs(&y, 1);
}

static void test_mm_ints(void **state)
{
    /* int32 wraps modulo 2^32, as in numpy: 2^30 * 4 + 15 -> 15. */
    const int32_t a32[2] = {1 << 30, 3}, b32[4] = {4, 1, 5, -2};
    const int32_t y32[2] = {15, (1 << 30) - 6};
    cge_tensor in[2] = {op_tensor(CGE_I32, CGE_SHAPE(1, 2), a32),
                        op_tensor(CGE_I32, CGE_SHAPE(2, 2), b32)};
    cge_tensor y = run("MatMul", in, 2, NULL, 0);
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(1, 2), y32);
    op_free_outputs(&y, 1);

    int64_t a64[12], b64[8];
    for (int i = 0; i < 12; i++)
        a64[i] = (i * 37 + 17 * 11) % 101 - 50;
    for (int i = 0; i < 8; i++)
        b64[i] = (i * 37 + 18 * 11) % 101 - 50;
    in[0] = op_tensor(CGE_I64, CGE_SHAPE(3, 4), a64);
    in[1] = op_tensor(CGE_I64, CGE_SHAPE(4, 2), b64);
    y = run("MatMul", in, 2, NULL, 0);
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(3, 2), mm_i64_y);
    op_free_outputs(&y, 1);

    uint32_t au[6], bu[12];
    for (int i = 0; i < 6; i++)
        au[i] = (uint32_t)((i * 37 + 19 * 11) % 101);
    for (int i = 0; i < 12; i++)
        bu[i] = (uint32_t)((i * 37 + 20 * 11) % 101);
    in[0] = op_tensor(CGE_U32, CGE_SHAPE(2, 3), au);
    in[1] = op_tensor(CGE_U32, CGE_SHAPE(2, 3, 2), bu);
    y = run("MatMul", in, 2, NULL, 0);
    op_assert_equal(&y, CGE_U32, CGE_SHAPE(2, 2, 2), mm_u32_y);
    op_free_outputs(&y, 1);

    const uint64_t a6[2] = {UINT64_C(1) << 40, 1}, b6[2] = {2, 3};
    const uint64_t y6[1] = {(UINT64_C(1) << 41) + 3};
    in[0] = op_tensor(CGE_U64, CGE_SHAPE(1, 2), a6);
    in[1] = op_tensor(CGE_U64, CGE_SHAPE(2), b6);
    y = run("MatMul", in, 2, NULL, 0);
    op_assert_equal(&y, CGE_U64, CGE_SHAPE(1), y6);
    op_free_outputs(&y, 1);
}

static void test_mm_empty(void **state)
{
    float dummy[12] = {0};
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(0, 3), dummy),
                        op_tensor(CGE_F32, CGE_SHAPE(3, 4), dummy)};
    cge_tensor y = run("MatMul", in, 2, NULL, 0);
    op_assert_shape(&y, CGE_SHAPE(0, 4));
    op_free_outputs(&y, 1);

    /* K = 0: an empty sum is zero. */
    const float zeros[6] = {0};
    in[0] = op_tensor(CGE_F32, CGE_SHAPE(2, 0), dummy);
    in[1] = op_tensor(CGE_F32, CGE_SHAPE(0, 3), dummy);
    y = run("MatMul", in, 2, NULL, 0);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2, 3), zeros);
    op_free_outputs(&y, 1);

    const int64_t izeros[6] = {0};
    int64_t idummy[1] = {0};
    in[0] = op_tensor(CGE_I64, CGE_SHAPE(3, 0), idummy);
    in[1] = op_tensor(CGE_I64, CGE_SHAPE(0, 2), idummy);
    y = run("MatMul", in, 2, NULL, 0);
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(3, 2), izeros);
    op_free_outputs(&y, 1);
}

static void test_mm_meta_errors(void **state)
{
    cge_tensor_desc in[2], out[1] = {{.name = "y"}};
    in[0] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SHAPE(2, 3)};
    in[1] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SHAPE(4, 5)};
    op_assert_error(op_infer("MatMul", in, NULL, 2, NULL, 0, out, 1), "[meta]", "node0");
    op_assert_error(op_infer("MatMul", in, NULL, 2, NULL, 0, out, 1), "[meta]",
                    "inner dimensions 3 and 4 differ");
    in[1] = (cge_tensor_desc){.dtype = CGE_F64, .shape = CGE_SHAPE(3, 5)};
    op_assert_error(op_infer("MatMul", in, NULL, 2, NULL, 0, out, 1), "[meta]", "float64");
    in[0] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SCALAR};
    in[1] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SHAPE(3)};
    op_assert_error(op_infer("MatMul", in, NULL, 2, NULL, 0, out, 1), "[meta]", "rank >= 1");
    in[0] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SHAPE(2, 3, 4)};
    in[1] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SHAPE(3, 4, 5)};
    op_assert_error(op_infer("MatMul", in, NULL, 2, NULL, 0, out, 1), "[meta]",
                    "do not broadcast");

    /* Dynamic dims flow through. */
    in[0] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SHAPE(CGE_DIM_DYNAMIC, 1, 7, 4)};
    in[1] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SHAPE(5, CGE_DIM_DYNAMIC, 6)};
    assert_int_equal(op_infer("MatMul", in, NULL, 2, NULL, 0, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(CGE_DIM_DYNAMIC, 5, 7, 6)));
    assert_int_equal(out[0].dtype, CGE_F32);
}

/* ---- the micro-kernels directly -------------------------------------------------- */

/* Every instruction set this CPU runs, on a transposed A, a broadcast row
 * bias, non-unit alpha and beta and ragged edges, tile by tile. */
static void test_gemm_kernels(void **state)
{
    const int64_t M = 50, N = 37, K = 600;
    float *at = new_f32(CGE_SHAPE(K, M), 60), *b = new_f32(CGE_SHAPE(K, N), 61);
    float *bias = new_f32(CGE_SHAPE(N), 62);
    float *bp = aligned_alloc(64, (size_t)cge__gemm_packed_b_floats(K, N) * sizeof(float));
    float *c = malloc(sizeof(float) * (size_t)(M * N));
    cge__gemm_pack_b(b, N, 1, K, N, 0, (N + 15) / 16, bp);
    const cge__gemm_isa isas[3] = {CGE_GEMM_ISA_GENERIC, CGE_GEMM_ISA_AVX2, CGE_GEMM_ISA_AVX512};
    int ran = 0;
    for (int v = 0; v < 3; v++) {
        if (!cge__gemm_isa_supported(isas[v]))
            continue;
        ran++;
        for (int64_t i = 0; i < M * N; i++)
            c[i] = NAN; /* must be overwritten, never read */
        cge__gemm_f32 g = {.M = M, .N = N, .K = K, .a = at, .a_rs = 1, .a_cs = M, .bp = bp,
                          .c = c, .ldc = N, .alpha = 0.5f, .bias = bias, .bias_rs = 0,
                          .bias_cs = 1, .beta = -2.0f, .isa = isas[v]};
        cge__gemm_tiling tl;
        cge__gemm_plan(1, M, N, 3, &tl);
        assert_true(tl.mt % CGE_GEMM_MT == 0 && tl.nt % CGE_GEMM_NR == 0);
        assert_true(tl.tiles_m * tl.mt >= M && tl.tiles_n * tl.nt >= N);
        for (int64_t tm = 0; tm < tl.tiles_m; tm++)
            for (int64_t tn = 0; tn < tl.tiles_n; tn++)
                cge__gemm_f32_tile(&g, tm * tl.mt, (tm + 1) * tl.mt, tn * tl.nt, (tn + 1) * tl.nt);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)at[k * M + i] * b[k * N + j];
                s = 0.5 * s - 2.0 * bias[j];
                if (!(fabs(c[i * N + j] - s) <= 1e-4 * (1 + fabs(s))))
                    fail_msg("isa %d [%lld,%lld]: got %g, expected %g", (int)isas[v],
                             (long long)i, (long long)j, c[i * N + j], s);
            }
    }
    assert_true(ran >= 1);
    free(at);
    free(b);
    free(bias);
    free(bp);
    free(c);
}

/* ---- Gemm ------------------------------------------------------------------------ */

static void test_gemm_trans_alpha_beta(void **state)
{
    float *at = new_f32(CGE_SHAPE(300, 7), 20), *bt = new_f32(CGE_SHAPE(19, 300), 21);
    float *c = new_f32(CGE_SHAPE(19), 22);
    cge_tensor in[3] = {op_tensor(CGE_F32, CGE_SHAPE(300, 7), at),
                        op_tensor(CGE_F32, CGE_SHAPE(19, 300), bt),
                        op_tensor(CGE_F32, CGE_SHAPE(19), c)};
    cge_attr at_[4] = {attr_f("alpha", 0.5f), attr_f("beta", 2.0f), attr_i("transA", 1),
                       attr_i("transB", 1)};
    cge_tensor y = run("Gemm", in, 3, at_, 4);
    op_assert_close(&y, CGE_F32, CGE_SHAPE(7, 19), gm_t_y, 1e-4, 1e-4);
    op_free_outputs(&y, 1);
    free(at);
    free(bt);
    free(c);
}

static void test_gemm_bias_shapes(void **state)
{
    const int64_t M = 40, N = 33;
    float *a = new_f32(CGE_SHAPE(M, 20), 23), *b = new_f32(CGE_SHAPE(20, N), 24);
    float *col = new_f32(CGE_SHAPE(M, 1), 25), *full = new_f32(CGE_SHAPE(M, N), 26);
    float *row = new_f32(CGE_SHAPE(1, N), 27), scalar[1] = {0.75f};
    float *want = malloc(sizeof(float) * (size_t)(M * N));
    cge_tensor in[3] = {op_tensor(CGE_F32, CGE_SHAPE(M, 20), a),
                        op_tensor(CGE_F32, CGE_SHAPE(20, N), b), op_absent()};
    cge_tensor y = run("Gemm", in, 2, NULL, 0);
    op_assert_close(&y, CGE_F32, CGE_SHAPE(M, N), gm_plain_y, 1e-5, 1e-5);
    op_free_outputs(&y, 1);
    y = run("Gemm", in, 3, NULL, 0); /* C given as absent */
    op_assert_close(&y, CGE_F32, CGE_SHAPE(M, N), gm_plain_y, 1e-5, 1e-5);
    op_free_outputs(&y, 1);

    in[2] = op_tensor(CGE_F32, CGE_SHAPE(M, 1), col);
    y = run("Gemm", in, 3, NULL, 0);
    op_assert_close(&y, CGE_F32, CGE_SHAPE(M, N), gm_col_y, 1e-5, 1e-5);
    op_free_outputs(&y, 1);

    cge_attr beta = attr_f("beta", 3.0f);
    struct {
        cge_shape s;
        const float *c;
        int64_t rs, cs;
    } cases[3] = {{CGE_SCALAR, scalar, 0, 0}, {CGE_SHAPE(1, N), row, 0, 1},
                  {CGE_SHAPE(M, N), full, N, 1}};
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                want[i * N + j] = gm_plain_y[i * N + j] + 3.0f * cases[k].c[i * cases[k].rs +
                                                                             j * cases[k].cs];
        in[2] = op_tensor(CGE_F32, cases[k].s, cases[k].c);
        y = run("Gemm", in, 3, &beta, 1);
        op_assert_close(&y, CGE_F32, CGE_SHAPE(M, N), want, 1e-5, 1e-5);
        op_free_outputs(&y, 1);
    }

    /* beta = 0 ignores C, even NaN. */
    float nanc[1] = {NAN};
    cge_attr beta0 = attr_f("beta", 0.0f);
    in[2] = op_tensor(CGE_F32, CGE_SCALAR, nanc);
    y = run("Gemm", in, 3, &beta0, 1);
    op_assert_close(&y, CGE_F32, CGE_SHAPE(M, N), gm_plain_y, 1e-5, 1e-5);
    op_free_outputs(&y, 1);
    free(a);
    free(b);
    free(col);
    free(full);
    free(row);
    free(want);
}

static void test_gemm_dtypes(void **state)
{
    double *a = new_f64(CGE_SHAPE(3, 4), 26), *bt = new_f64(CGE_SHAPE(5, 4), 27);
    double *c = new_f64(CGE_SHAPE(3, 5), 28);
    cge_tensor in[3] = {op_tensor(CGE_F64, CGE_SHAPE(3, 4), a),
                        op_tensor(CGE_F64, CGE_SHAPE(5, 4), bt),
                        op_tensor(CGE_F64, CGE_SHAPE(3, 5), c)};
    cge_attr at[3] = {attr_f("alpha", 1.5f), attr_f("beta", -0.25f), attr_i("transB", 1)};
    cge_tensor y = run("Gemm", in, 3, at, 3);
    op_assert_close(&y, CGE_F64, CGE_SHAPE(3, 5), gm_f64_y, 1e-12, 1e-12);
    op_free_outputs(&y, 1);
    free(a);
    free(bt);
    free(c);

    int32_t ai[6], bi[6], ci[2];
    for (int i = 0; i < 6; i++) {
        ai[i] = (i * 37 + 29 * 11) % 101 - 50;
        bi[i] = (i * 37 + 30 * 11) % 101 - 50;
    }
    for (int i = 0; i < 2; i++)
        ci[i] = (i * 37 + 31 * 11) % 101 - 50;
    in[0] = op_tensor(CGE_I32, CGE_SHAPE(2, 3), ai);
    in[1] = op_tensor(CGE_I32, CGE_SHAPE(3, 2), bi);
    in[2] = op_tensor(CGE_I32, CGE_SHAPE(2), ci);
    y = run("Gemm", in, 3, NULL, 0);
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(2, 2), gm_i32_y);
    op_free_outputs(&y, 1);
    cge_attr ab[2] = {attr_f("alpha", 2.0f), attr_f("beta", 3.0f)};
    y = run("Gemm", in, 3, ab, 2);
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(2, 2), gm_i32_ab_y);
    op_free_outputs(&y, 1);

    /* float16: [1 2] x [3 4]^T + 0.5 = 11.5, exact. */
    uint16_t ah[2] = {cge_f32_to_f16(1), cge_f32_to_f16(2)};
    uint16_t bh[2] = {cge_f32_to_f16(3), cge_f32_to_f16(4)}, ch[1] = {cge_f32_to_f16(0.5f)};
    uint16_t yh[1] = {cge_f32_to_f16(11.5f)};
    in[0] = op_tensor(CGE_F16, CGE_SHAPE(1, 2), ah);
    in[1] = op_tensor(CGE_F16, CGE_SHAPE(2, 1), bh);
    in[2] = op_tensor(CGE_F16, CGE_SCALAR, ch);
    y = run("Gemm", in, 3, NULL, 0);
    op_assert_equal(&y, CGE_F16, CGE_SHAPE(1, 1), yh);
    op_free_outputs(&y, 1);
}

static void test_gemm_empty_k(void **state)
{
    float dummy[1] = {0}, c[2] = {1, 2};
    const float want[6] = {2, 4, 2, 4, 2, 4};
    cge_tensor in[3] = {op_tensor(CGE_F32, CGE_SHAPE(3, 0), dummy),
                        op_tensor(CGE_F32, CGE_SHAPE(0, 2), dummy),
                        op_tensor(CGE_F32, CGE_SHAPE(2), c)};
    cge_attr beta = attr_f("beta", 2.0f);
    cge_tensor y = run("Gemm", in, 3, &beta, 1);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3, 2), want);
    op_free_outputs(&y, 1);
}

static void test_gemm_meta_errors(void **state)
{
    cge_tensor_desc in[3], out[1] = {{.name = "y"}};
    in[0] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SHAPE(2, 3, 4)};
    in[1] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SHAPE(4, 5)};
    op_assert_error(op_infer("Gemm", in, NULL, 2, NULL, 0, out, 1), "[meta]", "rank 2");
    op_assert_error(op_infer("Gemm", in, NULL, 2, NULL, 0, out, 1), "[meta]", "node0");
    in[0] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SHAPE(4, 3)};
    cge_attr ta = attr_i("transA", 1);
    assert_int_equal(op_infer("Gemm", in, NULL, 2, &ta, 1, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(3, 5)));
    op_assert_error(op_infer("Gemm", in, NULL, 2, NULL, 0, out, 1), "[meta]",
                    "inner dimensions 3 and 4 differ");
    in[2] = (cge_tensor_desc){.dtype = CGE_F32, .shape = CGE_SHAPE(4)};
    op_assert_error(op_infer("Gemm", in, NULL, 3, &ta, 1, out, 1), "[meta]",
                    "does not broadcast to [3,5]");
    in[2] = (cge_tensor_desc){.dtype = CGE_F64, .shape = CGE_SHAPE(5)};
    op_assert_error(op_infer("Gemm", in, NULL, 3, &ta, 1, out, 1), "[meta]", "must agree");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mm_batched_ragged), cmocka_unit_test(test_mm_broadcast),
        cmocka_unit_test(test_mm_vectors),        cmocka_unit_test(test_mm_large_vs_loop),
        cmocka_unit_test(test_mm_single_row),
        cmocka_unit_test(test_mm_f64),            cmocka_unit_test(test_mm_half),
        cmocka_unit_test(test_mm_ints),           cmocka_unit_test(test_mm_empty),
        cmocka_unit_test(test_mm_meta_errors),    cmocka_unit_test(test_gemm_kernels),
        cmocka_unit_test(test_gemm_trans_alpha_beta), cmocka_unit_test(test_gemm_bias_shapes),
        cmocka_unit_test(test_gemm_dtypes),       cmocka_unit_test(test_gemm_empty_k),
        cmocka_unit_test(test_gemm_meta_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
