/* Tests of the broadcasting binary family (Add Sub Mul Div Pow Equal Less
 * Greater Where) against numpy references (ew_binary_fixtures.h) and hand
 * values, and of the broadcast iteration helper (broadcast.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ew_binary_fixtures.h"
#include "op_runner.h"
#include "ops/broadcast.h"

#define RT 1e-6 /* float32 results vs numpy */

static cge_tensor T(cge_dtype dt, cge_shape s, const void *d) { return op_tensor(dt, s, d); }

/* Run a 2-input op, fail the test on error. */
static cge_tensor run2(const char *op, cge_tensor a, cge_tensor b)
{
    cge_tensor in[2] = {a, b}, out[1];
    cge_status st = op_run(op, in, 2, NULL, 0, out, 1);
    if (st)
        fail_msg("%s failed: %s", op, cge_last_error());
    return out[0];
}

static cge_tensor run_where(cge_tensor c, cge_tensor x, cge_tensor y)
{
    cge_tensor in[3] = {c, x, y}, out[1];
    cge_status st = op_run("Where", in, 3, NULL, 0, out, 1);
    if (st)
        fail_msg("Where failed: %s", cge_last_error());
    return out[0];
}

/* ---- broadcast helper ---------------------------------------------------- */

static void test_bcast_collapse(void **state)
{
    cge__bcast bc;
    cge_shape o = CGE_SHAPE(2, 3, 4), same = CGE_SHAPE(2, 3, 4), vec = CGE_SHAPE(4),
              sc = CGE_SCALAR, col = CGE_SHAPE(3, 1);
    const cge_shape *ins[2] = {&o, &same};
    assert_int_equal(cge__bcast_init(&bc, &o, ins, 2), CGE_OK);
    assert_int_equal(bc.rank, 1);
    assert_int_equal(bc.dims[0], 24);
    assert_true(cge__bcast_is_dense(&bc, 0) && cge__bcast_is_dense(&bc, 1));

    ins[1] = &sc;
    assert_int_equal(cge__bcast_init(&bc, &o, ins, 2), CGE_OK);
    assert_int_equal(bc.rank, 1);
    assert_int_equal(bc.strides[1][0], 0);
    assert_true(cge__bcast_is_scalar(&bc, 1));
    assert_false(cge__bcast_is_scalar(&bc, 0));

    ins[1] = &vec; /* [2,3,4] + [4]: rows of 4, the vector restarting */
    assert_int_equal(cge__bcast_init(&bc, &o, ins, 2), CGE_OK);
    assert_int_equal(bc.rank, 2);
    assert_int_equal(bc.dims[0], 6);
    assert_int_equal(bc.dims[1], 4);
    assert_int_equal(bc.strides[0][0], 4);
    assert_int_equal(bc.strides[0][1], 1);
    assert_int_equal(bc.strides[1][0], 0);
    assert_int_equal(bc.strides[1][1], 1);

    ins[1] = &col; /* [2,3,4] + [3,1] */
    assert_int_equal(cge__bcast_init(&bc, &o, ins, 2), CGE_OK);
    assert_int_equal(bc.rank, 3);
    assert_int_equal(bc.strides[1][0], 0);
    assert_int_equal(bc.strides[1][1], 1);
    assert_int_equal(bc.strides[1][2], 0);

    cge_shape bad = CGE_SHAPE(3);
    ins[1] = &bad;
    assert_int_equal(cge__bcast_init(&bc, &o, ins, 2), CGE_ERR_SHAPE);
    cge_shape dyn = CGE_SHAPE(CGE_DIM_DYNAMIC, 4);
    ins[1] = &dyn;
    assert_int_equal(cge__bcast_init(&bc, &o, ins, 2), CGE_ERR_INVALID_ARG);
    /* Broadcasting is one-way: an input may not be larger than the output. */
    int64_t st[CGE_MAX_RANK];
    assert_false(cge__broadcast_strides(&o, &vec, st));
    assert_true(cge__broadcast_strides(&col, &o, st));
    assert_int_equal(st[0], 0);
    assert_int_equal(st[1], 1);
    assert_int_equal(st[2], 0);
}

/* Iterating from every start offset visits exactly the offsets that explicit
 * index arithmetic gives, for a shape that does not collapse. */
static void test_bcast_iter_matches_indexing(void **state)
{
    cge_shape o = CGE_SHAPE(3, 2, 5, 4), a = CGE_SHAPE(3, 1, 5, 1), b = CGE_SHAPE(2, 1, 4);
    const cge_shape *ins[2] = {&a, &b};
    cge__bcast bc;
    assert_int_equal(cge__bcast_init(&bc, &o, ins, 2), CGE_OK);
    int64_t numel = 3 * 2 * 5 * 4;
    for (int64_t start = 0; start < numel; start += 7) {
        cge__bcast_iter it;
        cge__bcast_iter_init(&bc, start, &it);
        while (it.pos < numel) {
            int64_t n = cge__bcast_iter_run(&bc, &it, numel);
            assert_true(n >= 1);
            for (int64_t k = 0; k < n; k++) {
                int64_t p = it.pos + k;
                int64_t i0 = p / 40, i1 = (p / 20) % 2, i2 = (p / 4) % 5, i3 = p % 4;
                int64_t la = bc.strides[0][bc.rank - 1], lb = bc.strides[1][bc.rank - 1];
                assert_int_equal(it.off[0] + k * la, i0 * 5 + i2);
                assert_int_equal(it.off[1] + k * lb, i1 * 4 + i3);
            }
            cge__bcast_iter_advance(&bc, &it, n);
        }
        assert_int_equal(it.pos, numel);
    }
}

/* cge__bcast_copy is Expand's body: [3,1] -> [2,3,4], in two ranges. */
static void test_bcast_copy(void **state)
{
    cge_shape o = CGE_SHAPE(2, 3, 4), in = CGE_SHAPE(3, 1);
    const cge_shape *ins[1] = {&in};
    cge__bcast bc;
    assert_int_equal(cge__bcast_init(&bc, &o, ins, 1), CGE_OK);
    const int16_t src[3] = {7, -8, 9};
    int16_t dst[24];
    memset(dst, 0, sizeof dst);
    cge__bcast_copy(&bc, 0, sizeof(int16_t), src, dst, 0, 10);
    cge__bcast_copy(&bc, 0, sizeof(int16_t), src, dst, 10, 24);
    for (int i = 0; i < 24; i++)
        assert_int_equal(dst[i], src[(i / 4) % 3]);
    /* An element size without a typed loop. */
    const uint8_t src3[3][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
    uint8_t dst3[24][3];
    cge__bcast_copy(&bc, 0, 3, src3, dst3, 0, 24);
    for (int i = 0; i < 24; i++)
        assert_memory_equal(dst3[i], src3[(i / 4) % 3], 3);
    /* An empty output iterates nothing. */
    cge_shape e = CGE_SHAPE(0, 3), row = CGE_SHAPE(3);
    ins[0] = &row;
    assert_int_equal(cge__bcast_init(&bc, &e, ins, 1), CGE_OK);
    assert_int_equal(bc.numel, 0);
}

/* ---- arithmetic ----------------------------------------------------------- */

static void test_add_same_shape_f32(void **state)
{
    cge_tensor c = run2("Add", T(CGE_F32, CGE_SHAPE(2, 3, 4), bin_a234),
                        T(CGE_F32, CGE_SHAPE(2, 3, 4), bin_b234));
    op_assert_close(&c, CGE_F32, CGE_SHAPE(2, 3, 4), bin_add_same, RT, 0);
    op_free_outputs(&c, 1);
}

static void test_broadcast_f32(void **state)
{
    cge_tensor a = T(CGE_F32, CGE_SHAPE(2, 3, 4), bin_a234);
    cge_tensor c = run2("Sub", a, T(CGE_F32, CGE_SHAPE(4), bin_v4));
    op_assert_close(&c, CGE_F32, CGE_SHAPE(2, 3, 4), bin_sub_vec, RT, 0);
    op_free_outputs(&c, 1);
    c = run2("Mul", a, T(CGE_F32, CGE_SHAPE(3, 1), bin_c31));
    op_assert_close(&c, CGE_F32, CGE_SHAPE(2, 3, 4), bin_mul_col, RT, 0);
    op_free_outputs(&c, 1);
    c = run2("Div", a, T(CGE_F32, CGE_SHAPE(4), bin_v4));
    op_assert_close(&c, CGE_F32, CGE_SHAPE(2, 3, 4), bin_div_vec, RT, 0);
    op_free_outputs(&c, 1);
    /* Both sides broadcast: [2,1,4] + [3,1] -> [2,3,4]. */
    c = run2("Add", T(CGE_F32, CGE_SHAPE(2, 1, 4), bin_x214), T(CGE_F32, CGE_SHAPE(3, 1), bin_c31));
    op_assert_close(&c, CGE_F32, CGE_SHAPE(2, 3, 4), bin_add_both, RT, 0);
    op_free_outputs(&c, 1);
}

static void test_scalars(void **state)
{
    const float s = 2.5f, v[6] = {1, 2, 3, 4, 5, 6};
    cge_tensor c = run2("Mul", T(CGE_F32, CGE_SCALAR, &s), T(CGE_F32, CGE_SHAPE(2, 3), v));
    const float want[6] = {2.5f, 5, 7.5f, 10, 12.5f, 15};
    op_assert_equal(&c, CGE_F32, CGE_SHAPE(2, 3), want);
    op_free_outputs(&c, 1);
    c = run2("Sub", T(CGE_F32, CGE_SHAPE(2, 3), v), T(CGE_F32, CGE_SCALAR, &s));
    const float want2[6] = {-1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.5f};
    op_assert_equal(&c, CGE_F32, CGE_SHAPE(2, 3), want2);
    op_free_outputs(&c, 1);
    /* rank 0 op rank 0 stays rank 0; [1] op rank 0 is [1]. */
    const int64_t x = 7, y = -3;
    c = run2("Div", T(CGE_I64, CGE_SCALAR, &x), T(CGE_I64, CGE_SCALAR, &y));
    const int64_t q = -2;
    op_assert_equal(&c, CGE_I64, CGE_SCALAR, &q);
    op_free_outputs(&c, 1);
    c = run2("Add", T(CGE_I64, CGE_SHAPE(1), &x), T(CGE_I64, CGE_SCALAR, &y));
    const int64_t sum = 4;
    op_assert_equal(&c, CGE_I64, CGE_SHAPE(1), &sum);
    op_free_outputs(&c, 1);
}

/* Outputs large enough for several blocks, with broadcasting that does not
 * collapse, so rows and blocks boundaries fall mid-row. */
static void test_broadcast_large(void **state)
{
    enum { D0 = 17, D1 = 29, D2 = 23, D3 = 41 };
    float *a = malloc(sizeof(float) * D0 * D2 * D3);  /* [17,1,23,41] */
    float *b = malloc(sizeof(float) * D1 * D3);       /* [29,1,41] */
    assert_non_null(a);
    assert_non_null(b);
    for (int i = 0; i < D0 * D2 * D3; i++)
        a[i] = (float)(i % 1000);
    for (int i = 0; i < D1 * D3; i++)
        b[i] = (float)(i * 1000);
    cge_tensor c = run2("Add", T(CGE_F32, CGE_SHAPE(D0, 1, D2, D3), a),
                        T(CGE_F32, CGE_SHAPE(D1, 1, D3), b));
    op_assert_shape(&c, CGE_SHAPE(D0, D1, D2, D3));
    const float *o = c.data;
    int64_t bad = -1;
    for (int i0 = 0; i0 < D0 && bad < 0; i0++)
        for (int i1 = 0; i1 < D1; i1++)
            for (int i2 = 0; i2 < D2; i2++)
                for (int i3 = 0; i3 < D3; i3++) {
                    int64_t p = (((int64_t)i0 * D1 + i1) * D2 + i2) * D3 + i3;
                    float want = a[(i0 * D2 + i2) * D3 + i3] + b[i1 * D3 + i3];
                    if (o[p] != want && bad < 0)
                        bad = p;
                }
    if (bad >= 0)
        fail_msg("element %lld wrong", (long long)bad);
    op_free_outputs(&c, 1);

    /* [N, C] + [C] and [N, C] * [N, 1] over 70000 elements. */
    enum { N = 1000, C = 70 };
    float *m = malloc(sizeof(float) * N * C), *row = malloc(sizeof(float) * C),
          *col = malloc(sizeof(float) * N);
    assert_non_null(m);
    assert_non_null(row);
    assert_non_null(col);
    for (int i = 0; i < N * C; i++)
        m[i] = (float)i;
    for (int j = 0; j < C; j++)
        row[j] = (float)(-j);
    for (int i = 0; i < N; i++)
        col[i] = (float)(i % 3);
    c = run2("Add", T(CGE_F32, CGE_SHAPE(N, C), m), T(CGE_F32, CGE_SHAPE(C), row));
    o = c.data;
    for (int i = 0; i < N * C; i++)
        if (o[i] != (float)i - (float)(i % C))
            fail_msg("row broadcast: element %d is %g", i, o[i]);
    op_free_outputs(&c, 1);
    c = run2("Mul", T(CGE_F32, CGE_SHAPE(N, C), m), T(CGE_F32, CGE_SHAPE(N, 1), col));
    o = c.data;
    for (int i = 0; i < N * C; i++)
        if (o[i] != (float)i * (float)((i / C) % 3))
            fail_msg("column broadcast: element %d is %g", i, o[i]);
    op_free_outputs(&c, 1);
    free(a);
    free(b);
    free(m);
    free(row);
    free(col);
}

static void test_f64(void **state)
{
    cge_tensor a = T(CGE_F64, CGE_SHAPE(3, 4), bin_d34), b = T(CGE_F64, CGE_SHAPE(3, 1), bin_d31);
    cge_tensor c = run2("Sub", a, b);
    op_assert_close(&c, CGE_F64, CGE_SHAPE(3, 4), bin_d_sub, 1e-15, 0);
    op_free_outputs(&c, 1);
    c = run2("Div", a, b);
    op_assert_close(&c, CGE_F64, CGE_SHAPE(3, 4), bin_d_div, 1e-15, 0);
    op_free_outputs(&c, 1);
    c = run2("Mul", a, b);
    op_assert_close(&c, CGE_F64, CGE_SHAPE(3, 4), bin_d_mul, 1e-15, 0);
    op_free_outputs(&c, 1);
    /* IEEE division by zero. */
    const double x[3] = {1, -1, 0}, z = 0;
    c = run2("Div", T(CGE_F64, CGE_SHAPE(3), x), T(CGE_F64, CGE_SCALAR, &z));
    const double *o = c.data;
    assert_true(isinf(o[0]) && o[0] > 0);
    assert_true(isinf(o[1]) && o[1] < 0);
    assert_true(isnan(o[2]));
    op_free_outputs(&c, 1);
}

static void test_int_arith(void **state)
{
    /* int32: wrap on overflow, division truncating toward zero, x / 0 = 0,
     * MIN / -1 = MIN. */
    const int32_t a[6] = {INT32_MAX, -7, 7, -7, 5, INT32_MIN};
    const int32_t b[6] = {1, 2, -2, -2, 0, -1};
    cge_tensor c = run2("Add", T(CGE_I32, CGE_SHAPE(6), a), T(CGE_I32, CGE_SHAPE(6), b));
    const int32_t add[6] = {INT32_MIN, -5, 5, -9, 5, INT32_MAX};
    op_assert_equal(&c, CGE_I32, CGE_SHAPE(6), add);
    op_free_outputs(&c, 1);
    c = run2("Div", T(CGE_I32, CGE_SHAPE(6), a), T(CGE_I32, CGE_SHAPE(6), b));
    const int32_t div[6] = {INT32_MAX, -3, -3, 3, 0, INT32_MIN};
    op_assert_equal(&c, CGE_I32, CGE_SHAPE(6), div);
    op_free_outputs(&c, 1);
    c = run2("Mul", T(CGE_I32, CGE_SHAPE(6), a), T(CGE_I32, CGE_SHAPE(6), b));
    const int32_t mul[6] = {INT32_MAX, -14, -14, 14, 0, INT32_MIN};
    op_assert_equal(&c, CGE_I32, CGE_SHAPE(6), mul);
    op_free_outputs(&c, 1);

    /* int64 broadcast: [2,3] - [3]; division by a zero column. */
    const int64_t l[6] = {10, 20, 30, -40, 50, INT64_MIN}, r[3] = {1, 0, 7};
    c = run2("Sub", T(CGE_I64, CGE_SHAPE(2, 3), l), T(CGE_I64, CGE_SHAPE(3), r));
    const int64_t sub[6] = {9, 20, 23, -41, 50, INT64_MAX - 6};
    op_assert_equal(&c, CGE_I64, CGE_SHAPE(2, 3), sub);
    op_free_outputs(&c, 1);
    c = run2("Div", T(CGE_I64, CGE_SHAPE(2, 3), l), T(CGE_I64, CGE_SHAPE(3), r));
    const int64_t idiv[6] = {10, 0, 4, -40, 0, INT64_MIN / 7};
    op_assert_equal(&c, CGE_I64, CGE_SHAPE(2, 3), idiv);
    op_free_outputs(&c, 1);

    /* Narrow and unsigned types wrap modulo 2^bits. */
    const int8_t i8a[3] = {127, -128, -128}, i8b[3] = {1, -1, -1};
    c = run2("Add", T(CGE_I8, CGE_SHAPE(3), i8a), T(CGE_I8, CGE_SHAPE(3), i8b));
    const int8_t i8add[3] = {-128, 127, 127};
    op_assert_equal(&c, CGE_I8, CGE_SHAPE(3), i8add);
    op_free_outputs(&c, 1);
    c = run2("Div", T(CGE_I8, CGE_SHAPE(3), i8a), T(CGE_I8, CGE_SHAPE(3), i8b));
    const int8_t i8div[3] = {127, -128, -128};
    op_assert_equal(&c, CGE_I8, CGE_SHAPE(3), i8div);
    op_free_outputs(&c, 1);
    const uint8_t u8a[3] = {1, 200, 0}, u8b[3] = {2, 100, 0};
    c = run2("Sub", T(CGE_U8, CGE_SHAPE(3), u8a), T(CGE_U8, CGE_SHAPE(3), u8b));
    const uint8_t u8sub[3] = {255, 100, 0};
    op_assert_equal(&c, CGE_U8, CGE_SHAPE(3), u8sub);
    op_free_outputs(&c, 1);
    const uint16_t u16a[2] = {65535, 300}, u16b[2] = {65535, 300};
    c = run2("Mul", T(CGE_U16, CGE_SHAPE(2), u16a), T(CGE_U16, CGE_SHAPE(2), u16b));
    const uint16_t u16mul[2] = {1, (uint16_t)(90000 % 65536)};
    op_assert_equal(&c, CGE_U16, CGE_SHAPE(2), u16mul);
    op_free_outputs(&c, 1);
    const uint64_t u64a[3] = {UINT64_MAX, 10, 9}, u64b[3] = {2, 0, 10};
    c = run2("Div", T(CGE_U64, CGE_SHAPE(3), u64a), T(CGE_U64, CGE_SHAPE(3), u64b));
    const uint64_t u64div[3] = {UINT64_MAX / 2, 0, 0};
    op_assert_equal(&c, CGE_U64, CGE_SHAPE(3), u64div);
    op_free_outputs(&c, 1);
    const int16_t i16a[2] = {-32768, 1000}, i16b[1] = {-1};
    c = run2("Mul", T(CGE_I16, CGE_SHAPE(2), i16a), T(CGE_I16, CGE_SHAPE(1), i16b));
    const int16_t i16mul[2] = {-32768, -1000};
    op_assert_equal(&c, CGE_I16, CGE_SHAPE(2), i16mul);
    op_free_outputs(&c, 1);
    const uint32_t u32a[2] = {0, 5}, u32b[1] = {7};
    c = run2("Sub", T(CGE_U32, CGE_SHAPE(2), u32a), T(CGE_U32, CGE_SCALAR, u32b));
    const uint32_t u32sub[2] = {UINT32_MAX - 6, UINT32_MAX - 1};
    op_assert_equal(&c, CGE_U32, CGE_SHAPE(2), u32sub);
    op_free_outputs(&c, 1);
}

static void test_half(void **state)
{
    cge_tensor a = T(CGE_F16, CGE_SHAPE(6), bin_h1), b = T(CGE_F16, CGE_SHAPE(6), bin_h2);
    cge_tensor c = run2("Add", a, b);
    op_assert_equal(&c, CGE_F16, CGE_SHAPE(6), bin_h_add);
    op_free_outputs(&c, 1);
    c = run2("Mul", a, b);
    op_assert_equal(&c, CGE_F16, CGE_SHAPE(6), bin_h_mul);
    op_free_outputs(&c, 1);
    c = run2("Less", a, b);
    op_assert_equal(&c, CGE_BOOL, CGE_SHAPE(6), bin_h_lt);
    op_free_outputs(&c, 1);

    /* bfloat16, exact values: [2] / scalar and [2] - [2]. */
    uint16_t x[2] = {cge_f32_to_bf16(1.5f), cge_f32_to_bf16(-6.0f)};
    uint16_t y = cge_f32_to_bf16(0.5f);
    c = run2("Div", T(CGE_BF16, CGE_SHAPE(2), x), T(CGE_BF16, CGE_SCALAR, &y));
    const uint16_t *o = c.data;
    assert_true(cge_bf16_to_f32(o[0]) == 3.0f);
    assert_true(cge_bf16_to_f32(o[1]) == -12.0f);
    op_free_outputs(&c, 1);
    uint16_t z[2] = {cge_f32_to_bf16(2.25f), cge_f32_to_bf16(1.0f)};
    c = run2("Sub", T(CGE_BF16, CGE_SHAPE(2), x), T(CGE_BF16, CGE_SHAPE(2), z));
    o = c.data;
    assert_true(cge_bf16_to_f32(o[0]) == -0.75f);
    assert_true(cge_bf16_to_f32(o[1]) == -7.0f);
    op_free_outputs(&c, 1);
}

static void test_pow(void **state)
{
    cge_tensor base = T(CGE_F32, CGE_SHAPE(2, 3), bin_pow_base);
    cge_tensor c = run2("Pow", base, T(CGE_F32, CGE_SHAPE(3), bin_pow_exp));
    op_assert_close(&c, CGE_F32, CGE_SHAPE(2, 3), bin_pow_ref, RT, 0);
    op_free_outputs(&c, 1);

    /* float64 base, float32 exponent: the output takes the base's dtype. */
    double db[6];
    for (int i = 0; i < 6; i++)
        db[i] = bin_pow_base[i];
    c = run2("Pow", T(CGE_F64, CGE_SHAPE(2, 3), db), T(CGE_F32, CGE_SHAPE(3), bin_pow_exp));
    op_assert_close(&c, CGE_F64, CGE_SHAPE(2, 3), bin_pow_d_ref, 1e-14, 0);
    op_free_outputs(&c, 1);

    /* Integers: exact, wrapping; negative exponents truncate 1/x^n. */
    const int32_t ib[7] = {2, -3, 2, 1, -1, 0, 3};
    const int32_t ie[7] = {10, 3, -1, -5, -3, 0, 21};
    c = run2("Pow", T(CGE_I32, CGE_SHAPE(7), ib), T(CGE_I32, CGE_SHAPE(7), ie));
    const int32_t iw[7] = {1024, -27, 0, 1, -1, 1, (int32_t)(10460353203LL - 2LL * 4294967296LL)};
    op_assert_equal(&c, CGE_I32, CGE_SHAPE(7), iw);
    op_free_outputs(&c, 1);

    /* int64 base with a float exponent truncates toward zero. */
    const int64_t lb[3] = {2, 10, -8};
    const float fe = 0.5f;
    c = run2("Pow", T(CGE_I64, CGE_SHAPE(3), lb), T(CGE_F32, CGE_SCALAR, &fe));
    const int64_t lw[3] = {1, 3, 0}; /* sqrt(-8) is NaN -> 0 */
    op_assert_equal(&c, CGE_I64, CGE_SHAPE(3), lw);
    op_free_outputs(&c, 1);

    /* float32 base with an int64 exponent; float16 base and exponent. */
    const float fb[3] = {2.0f, -2.0f, 0.5f};
    const int64_t le[3] = {3, 3, -2};
    c = run2("Pow", T(CGE_F32, CGE_SHAPE(3), fb), T(CGE_I64, CGE_SHAPE(3), le));
    const float fw[3] = {8.0f, -8.0f, 4.0f};
    op_assert_equal(&c, CGE_F32, CGE_SHAPE(3), fw);
    op_free_outputs(&c, 1);
    uint16_t hb[2] = {cge_f32_to_f16(3.0f), cge_f32_to_f16(4.0f)}, he = cge_f32_to_f16(2.0f);
    c = run2("Pow", T(CGE_F16, CGE_SHAPE(2), hb), T(CGE_F16, CGE_SCALAR, &he));
    const uint16_t *ho = c.data;
    assert_true(cge_f16_to_f32(ho[0]) == 9.0f);
    assert_true(cge_f16_to_f32(ho[1]) == 16.0f);
    op_free_outputs(&c, 1);
}

/* ---- comparisons ------------------------------------------------------------ */

static void test_compare(void **state)
{
    const float a[5] = {1.0f, 2.0f, NAN, -0.0f, 3.0f};
    const float b[5] = {1.0f, 3.0f, NAN, 0.0f, 2.0f};
    cge_tensor ta = T(CGE_F32, CGE_SHAPE(5), a), tb = T(CGE_F32, CGE_SHAPE(5), b);
    cge_tensor c = run2("Equal", ta, tb);
    const uint8_t eq[5] = {1, 0, 0, 1, 0};
    op_assert_equal(&c, CGE_BOOL, CGE_SHAPE(5), eq);
    op_free_outputs(&c, 1);
    c = run2("Less", ta, tb);
    const uint8_t lt[5] = {0, 1, 0, 0, 0};
    op_assert_equal(&c, CGE_BOOL, CGE_SHAPE(5), lt);
    op_free_outputs(&c, 1);
    c = run2("Greater", ta, tb);
    const uint8_t gt[5] = {0, 0, 0, 0, 1};
    op_assert_equal(&c, CGE_BOOL, CGE_SHAPE(5), gt);
    op_free_outputs(&c, 1);

    /* int64 [2,3] vs [2,1]; uint64 values above INT64_MAX. */
    const int64_t m[6] = {1, 5, 9, -1, 0, 1}, k[2] = {5, 0};
    c = run2("Greater", T(CGE_I64, CGE_SHAPE(2, 3), m), T(CGE_I64, CGE_SHAPE(2, 1), k));
    const uint8_t g2[6] = {0, 0, 1, 0, 0, 1};
    op_assert_equal(&c, CGE_BOOL, CGE_SHAPE(2, 3), g2);
    op_free_outputs(&c, 1);
    const uint64_t ua[2] = {UINT64_MAX, 1}, ub = (uint64_t)1 << 63;
    c = run2("Less", T(CGE_U64, CGE_SHAPE(2), ua), T(CGE_U64, CGE_SCALAR, &ub));
    const uint8_t l2[2] = {0, 1};
    op_assert_equal(&c, CGE_BOOL, CGE_SHAPE(2), l2);
    op_free_outputs(&c, 1);

    /* bool Equal compares truth values; rank 0 against [4]. */
    const uint8_t bv[4] = {0, 1, 1, 0}, bs = 1;
    c = run2("Equal", T(CGE_BOOL, CGE_SHAPE(4), bv), T(CGE_BOOL, CGE_SCALAR, &bs));
    op_assert_equal(&c, CGE_BOOL, CGE_SHAPE(4), bv);
    op_free_outputs(&c, 1);
    /* int32 Equal; float64 Less. */
    const int32_t i1[3] = {3, 4, 5}, i2[3] = {3, 0, 5};
    c = run2("Equal", T(CGE_I32, CGE_SHAPE(3), i1), T(CGE_I32, CGE_SHAPE(3), i2));
    const uint8_t e3[3] = {1, 0, 1};
    op_assert_equal(&c, CGE_BOOL, CGE_SHAPE(3), e3);
    op_free_outputs(&c, 1);
    const double d1[2] = {-1e300, 1e-300}, d2 = 0;
    c = run2("Less", T(CGE_F64, CGE_SHAPE(2), d1), T(CGE_F64, CGE_SCALAR, &d2));
    const uint8_t l3[2] = {1, 0};
    op_assert_equal(&c, CGE_BOOL, CGE_SHAPE(2), l3);
    op_free_outputs(&c, 1);
}

/* ---- Where ------------------------------------------------------------------ */

static void test_where(void **state)
{
    /* condition [2,1], X [2,3], Y scalar. */
    const uint8_t cnd[2] = {1, 0};
    const float x[6] = {1, 2, 3, 4, 5, 6}, y = -1;
    cge_tensor o = run_where(T(CGE_BOOL, CGE_SHAPE(2, 1), cnd), T(CGE_F32, CGE_SHAPE(2, 3), x),
                             T(CGE_F32, CGE_SCALAR, &y));
    const float w[6] = {1, 2, 3, -1, -1, -1};
    op_assert_equal(&o, CGE_F32, CGE_SHAPE(2, 3), w);
    op_free_outputs(&o, 1);

    /* int64, same shapes; any nonzero byte is true. */
    const uint8_t c4[4] = {0, 1, 2, 0};
    const int64_t x4[4] = {1, 2, 3, 4}, y4[4] = {-1, -2, -3, -4};
    o = run_where(T(CGE_BOOL, CGE_SHAPE(4), c4), T(CGE_I64, CGE_SHAPE(4), x4),
                  T(CGE_I64, CGE_SHAPE(4), y4));
    const int64_t w4[4] = {-1, 2, 3, -4};
    op_assert_equal(&o, CGE_I64, CGE_SHAPE(4), w4);
    op_free_outputs(&o, 1);

    /* bool and float16 values (1- and 2-byte elements); X [3] Y [2,1]. */
    const uint8_t c3[3] = {1, 0, 1}, bx[3] = {0, 0, 0}, by[2] = {1, 0};
    o = run_where(T(CGE_BOOL, CGE_SHAPE(3), c3), T(CGE_BOOL, CGE_SHAPE(3), bx),
                  T(CGE_BOOL, CGE_SHAPE(2, 1), by));
    const uint8_t wb[6] = {0, 1, 0, 0, 0, 0};
    op_assert_equal(&o, CGE_BOOL, CGE_SHAPE(2, 3), wb);
    op_free_outputs(&o, 1);
    uint16_t hx[3] = {cge_f32_to_f16(1.5f), cge_f32_to_f16(2.5f), cge_f32_to_f16(3.5f)};
    uint16_t hy = cge_f32_to_f16(-0.25f);
    o = run_where(T(CGE_BOOL, CGE_SHAPE(3), c3), T(CGE_F16, CGE_SHAPE(3), hx),
                  T(CGE_F16, CGE_SCALAR, &hy));
    const uint16_t hw[3] = {hx[0], hy, hx[2]};
    op_assert_equal(&o, CGE_F16, CGE_SHAPE(3), hw);
    op_free_outputs(&o, 1);

    /* Many blocks, all three broadcast: c [N,1], X [C], Y [N,C]. */
    enum { N = 600, C = 55 };
    uint8_t *cc = malloc(N);
    int32_t *xx = malloc(sizeof(int32_t) * C), *yy = malloc(sizeof(int32_t) * N * C);
    assert_non_null(cc);
    assert_non_null(xx);
    assert_non_null(yy);
    for (int i = 0; i < N; i++)
        cc[i] = (uint8_t)(i % 2);
    for (int j = 0; j < C; j++)
        xx[j] = j;
    for (int i = 0; i < N * C; i++)
        yy[i] = -i;
    o = run_where(T(CGE_BOOL, CGE_SHAPE(N, 1), cc), T(CGE_I32, CGE_SHAPE(C), xx),
                  T(CGE_I32, CGE_SHAPE(N, C), yy));
    const int32_t *oo = o.data;
    for (int i = 0; i < N * C; i++) {
        int32_t want = cc[i / C] ? xx[i % C] : yy[i];
        if (oo[i] != want)
            fail_msg("Where element %d: %d, expected %d", i, oo[i], want);
    }
    op_free_outputs(&o, 1);
    free(cc);
    free(xx);
    free(yy);
}

/* ---- empty tensors, meta ------------------------------------------------------ */

static void test_empty(void **state)
{
    const float v[3] = {1, 2, 3};
    cge_tensor c = run2("Add", T(CGE_F32, CGE_SHAPE(0, 3), NULL), T(CGE_F32, CGE_SHAPE(3), v));
    op_assert_shape(&c, CGE_SHAPE(0, 3));
    op_free_outputs(&c, 1);
    c = run2("Less", T(CGE_I64, CGE_SHAPE(2, 0), NULL), T(CGE_I64, CGE_SHAPE(1), v));
    op_assert_shape(&c, CGE_SHAPE(2, 0));
    assert_int_equal(c.dtype, CGE_BOOL);
    op_free_outputs(&c, 1);
    const uint8_t t = 1;
    c = run_where(T(CGE_BOOL, CGE_SCALAR, &t), T(CGE_F32, CGE_SHAPE(0), NULL),
                  T(CGE_F32, CGE_SHAPE(1), v));
    op_assert_shape(&c, CGE_SHAPE(0));
    op_free_outputs(&c, 1);
}

static cge_status infer2(const char *op, cge_dtype da, cge_shape sa, cge_dtype db, cge_shape sb,
                         cge_tensor_desc *out)
{
    cge_tensor_desc in[2] = {{.name = "a", .dtype = da, .shape = sa},
                             {.name = "b", .dtype = db, .shape = sb}};
    return op_infer(op, in, NULL, 2, NULL, 0, out, 1);
}

static void test_meta(void **state)
{
    cge_tensor_desc out[1];
    /* Dynamic dims: propagate, or take the known side. */
    assert_int_equal(infer2("Add", CGE_F32, CGE_SHAPE(CGE_DIM_DYNAMIC, 3), CGE_F32, CGE_SHAPE(3),
                            out),
                     CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(CGE_DIM_DYNAMIC, 3)));
    assert_int_equal(out[0].dtype, CGE_F32);
    assert_int_equal(infer2("Equal", CGE_I32, CGE_SHAPE(CGE_DIM_DYNAMIC, 3), CGE_I32,
                            CGE_SHAPE(4, 1), out),
                     CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(4, 3)));
    assert_int_equal(out[0].dtype, CGE_BOOL);
    assert_int_equal(infer2("Pow", CGE_I64, CGE_SHAPE(2), CGE_F16, CGE_SCALAR, out), CGE_OK);
    assert_int_equal(out[0].dtype, CGE_I64);

    op_assert_error(infer2("Add", CGE_F32, CGE_SHAPE(2, 3), CGE_I32, CGE_SHAPE(2, 3), out),
                    "[meta]", "node0");
    op_assert_error(infer2("Add", CGE_F32, CGE_SHAPE(2, 3), CGE_I32, CGE_SHAPE(2, 3), out),
                    "[meta]", "A is float32, B is int32");
    op_assert_error(infer2("Sub", CGE_F32, CGE_SHAPE(2, 3), CGE_F32, CGE_SHAPE(4), out),
                    "[meta]", "inputs [2,3] and [4] do not broadcast");
    op_assert_error(infer2("Mul", CGE_I8, CGE_SHAPE(2, 3), CGE_I8, CGE_SHAPE(3, 2), out),
                    "[meta]", "node0");
    op_assert_error(infer2("Div", CGE_BOOL, CGE_SHAPE(2), CGE_BOOL, CGE_SHAPE(2), out), "[meta]",
                    "node0");
    op_assert_error(infer2("Pow", CGE_U8, CGE_SHAPE(2), CGE_F32, CGE_SHAPE(2), out), "[meta]",
                    "node0");
    op_assert_error(infer2("Pow", CGE_F32, CGE_SHAPE(2), CGE_BOOL, CGE_SHAPE(2), out), "[meta]",
                    "node0");
    op_assert_error(infer2("Equal", CGE_F32, CGE_SHAPE(2), CGE_F64, CGE_SHAPE(2), out), "[meta]",
                    "A is float32, B is float64");
    op_assert_error(infer2("Less", CGE_BOOL, CGE_SHAPE(2), CGE_BOOL, CGE_SHAPE(2), out), "[meta]",
                    "node0");
    op_assert_error(infer2("Greater", CGE_I32, CGE_SHAPE(5), CGE_I32, CGE_SHAPE(2, 3), out),
                    "[meta]", "do not broadcast");

    cge_tensor_desc w[3] = {{.name = "c", .dtype = CGE_F32, .shape = CGE_SHAPE(2)},
                            {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(2)},
                            {.name = "y", .dtype = CGE_F32, .shape = CGE_SHAPE(2)}};
    op_assert_error(op_infer("Where", w, NULL, 3, NULL, 0, out, 1), "[meta]", "node0");
    w[0].dtype = CGE_BOOL;
    w[2].dtype = CGE_I32;
    op_assert_error(op_infer("Where", w, NULL, 3, NULL, 0, out, 1), "[meta]",
                    "X is float32, Y is int32");
    w[2].dtype = CGE_F32;
    w[2].shape = CGE_SHAPE(3);
    op_assert_error(op_infer("Where", w, NULL, 3, NULL, 0, out, 1), "[meta]",
                    "do not broadcast");
    w[0].shape = CGE_SHAPE(4, 1);
    w[2].shape = CGE_SHAPE(1, 1, 2);
    assert_int_equal(op_infer("Where", w, NULL, 3, NULL, 0, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(1, 4, 2)));
}

/* ---- kernels called directly: in place, and launch-time checks ---------------- */

typedef struct direct {
    cge_device *dev;
    cge_stream *stream;
} direct;

static int direct_setup(void **state)
{
    direct *d = calloc(1, sizeof *d);
    if (!d || cge_device_create_cpu(NULL, &d->dev) || cge_stream_create(d->dev, &d->stream))
        return -1;
    *state = d;
    return 0;
}

static int direct_teardown(void **state)
{
    direct *d = *state;
    cge_stream_destroy(d->stream);
    cge_device_destroy(d->dev);
    free(d);
    return 0;
}

static cge_status launch_direct(direct *d, const char *op, cge_tensor *in, int32_t nin,
                                cge_tensor *out)
{
    const cge_op_def *def = cge_op_find("", op, 0);
    assert_non_null(def);
    const cge_kernel_def *k = cge_op_find_kernel(def, "cpu", in[0].dtype);
    assert_non_null(k);
    cge_kernel_ctx ctx = {.op_type = op, .node_name = "direct0", .num_inputs = nin,
                          .inputs = in, .num_outputs = 1, .outputs = out,
                          .device = d->dev, .num_threads = cge_device_num_threads(d->dev)};
    cge_status st = k->launch(&ctx, d->stream);
    cge_status sy = cge_stream_synchronize(d->stream);
    return st ? st : sy;
}

/* The planner may give Add's output A's buffer: results must not change,
 * with several blocks and a broadcast B. */
static void test_add_in_place(void **state)
{
    direct *d = *state;
    enum { N = 2000, C = 50 };
    void *pa = NULL, *pb = NULL;
    assert_int_equal(cge_mem_alloc(d->dev, sizeof(float) * N * C, &pa), CGE_OK);
    assert_int_equal(cge_mem_alloc(d->dev, sizeof(float) * C, &pb), CGE_OK);
    float *a = pa, *b = pb;
    for (int i = 0; i < N * C; i++)
        a[i] = (float)i;
    for (int j = 0; j < C; j++)
        b[j] = (float)(j * 1000000);
    const cge_op_def *def = cge_op_find("", "Add", 0);
    assert_int_equal(def->kernels[0].inplace_input, 0);
    cge_tensor in[2] = {T(CGE_F32, CGE_SHAPE(N, C), a), T(CGE_F32, CGE_SHAPE(C), b)};
    cge_tensor out[1] = {T(CGE_F32, CGE_SHAPE(N, C), a)};
    assert_int_equal(launch_direct(d, "Add", in, 2, out), CGE_OK);
    for (int i = 0; i < N * C; i++)
        if (a[i] != (float)i + (float)((i % C) * 1000000))
            fail_msg("in-place element %d is %g", i, a[i]);
    cge_mem_free(d->dev, a);
    cge_mem_free(d->dev, b);
}

static void test_launch_checks(void **state)
{
    direct *d = *state;
    float a[6] = {0}, b[3] = {0}, o[6];
    cge_tensor in[2] = {T(CGE_F32, CGE_SHAPE(2, 3), a), T(CGE_F32, CGE_SHAPE(3), b)};
    /* Output not the broadcast shape. */
    cge_tensor out[1] = {T(CGE_F32, CGE_SHAPE(3, 2), o)};
    op_assert_error(launch_direct(d, "Add", in, 2, out), "[kernel]", "direct0");
    /* Output dtype not what the op writes. */
    out[0] = T(CGE_F64, CGE_SHAPE(2, 3), o);
    op_assert_error(launch_direct(d, "Less", in, 2, out), "[kernel]", "direct0");
    /* Missing buffer. */
    out[0] = T(CGE_F32, CGE_SHAPE(2, 3), NULL);
    op_assert_error(launch_direct(d, "Mul", in, 2, out), "[kernel]", "direct0");
    /* Mixed dtypes outside Pow. */
    int32_t ib[3] = {0};
    in[1] = T(CGE_I32, CGE_SHAPE(3), ib);
    out[0] = T(CGE_F32, CGE_SHAPE(2, 3), o);
    op_assert_error(launch_direct(d, "Sub", in, 2, out), "[kernel]", "direct0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bcast_collapse),
        cmocka_unit_test(test_bcast_iter_matches_indexing),
        cmocka_unit_test(test_bcast_copy),
        cmocka_unit_test(test_add_same_shape_f32),
        cmocka_unit_test(test_broadcast_f32),
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_broadcast_large),
        cmocka_unit_test(test_f64),
        cmocka_unit_test(test_int_arith),
        cmocka_unit_test(test_half),
        cmocka_unit_test(test_pow),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_where),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_meta),
        cmocka_unit_test_setup_teardown(test_add_in_place, direct_setup, direct_teardown),
        cmocka_unit_test_setup_teardown(test_launch_checks, direct_setup, direct_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
