/* Tests of the binary_ext family (LessOrEqual GreaterOrEqual And Or Xor Mod
 * BitShift BitwiseAnd/Or/Xor PRelu): onnx 1.12's node test cases
 * (binary_ext_fixtures.h), then edge cases and broadcast paths by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "binary_ext_fixtures.h"
#include "op_runner.h"

#define NCASES (sizeof binary_ext_cases / sizeof binary_ext_cases[0])

static cge_tensor T(cge_dtype dt, cge_shape s, const void *d) { return op_tensor(dt, s, d); }

static cge_tensor run2(const char *op, cge_tensor a, cge_tensor b, const cge_attr *attrs,
                       int32_t nattrs)
{
    cge_tensor in[2] = {a, b}, out[1];
    cge_status st = op_run(op, in, 2, attrs, nattrs, out, 1);
    if (st)
        fail_msg("%s failed: %s", op, cge_last_error());
    return out[0];
}

static void test_onnx_cases(void **state)
{
    static const char *const ops[] = {"LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor",
                                      "Mod", "BitShift", "PRelu"};
    int total = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int n = ew2_run_cases(binary_ext_cases, NCASES, ops[i]);
        if (n == 0)
            fail_msg("no onnx cases for %s", ops[i]);
        total += n;
    }
    assert_int_equal(total, (int)NCASES);
}

/* Integer Mod in both modes, including x mod 0 and MIN mod -1. */
static void test_mod_integers(void **state)
{
    const int32_t x[8] = {7, -7, 7, -7, 5, INT32_MIN, 0, -6};
    const int32_t y[8] = {3, 3, -3, -3, 0, -1, 4, 3};
    const int32_t want_mod[8] = {1, 2, -2, -1, 0, 0, 0, 0};
    const int32_t want_fmod[8] = {1, -1, 1, -1, 0, 0, 0, 0};
    cge_attr f0 = CGE_ATTR_I("fmod", 0), f1 = CGE_ATTR_I("fmod", 1);
    cge_tensor r = run2("Mod", T(CGE_I32, CGE_SHAPE(8), x), T(CGE_I32, CGE_SHAPE(8), y), &f0, 1);
    op_assert_equal(&r, CGE_I32, CGE_SHAPE(8), want_mod);
    op_free_outputs(&r, 1);
    r = run2("Mod", T(CGE_I32, CGE_SHAPE(8), x), T(CGE_I32, CGE_SHAPE(8), y), &f1, 1);
    op_assert_equal(&r, CGE_I32, CGE_SHAPE(8), want_fmod);
    op_free_outputs(&r, 1);
    /* default fmod is 0 */
    const int8_t a8[3] = {-128, 127, -5}, b8[1] = {-3};
    const int8_t w8[3] = {-2, -2, -2};
    r = run2("Mod", T(CGE_I8, CGE_SHAPE(3), a8), T(CGE_I8, CGE_SHAPE(1), b8), NULL, 0);
    op_assert_equal(&r, CGE_I8, CGE_SHAPE(3), w8);
    op_free_outputs(&r, 1);
    /* float fmod (fmod = 1) in float16 and bfloat16 */
    uint16_t hx[3], hy[3], hw[3], bx[3], by[3], bw[3];
    const float fx[3] = {5.5f, -5.5f, 3.0f}, fy[3] = {2.0f, 2.0f, 0.0f};
    for (int i = 0; i < 3; i++) {
        hx[i] = cge_f32_to_f16(fx[i]);
        hy[i] = cge_f32_to_f16(fy[i]);
        hw[i] = cge_f32_to_f16(fmodf(fx[i], fy[i]));
        bx[i] = cge_f32_to_bf16(fx[i]);
        by[i] = cge_f32_to_bf16(fy[i]);
        bw[i] = cge_f32_to_bf16(fmodf(fx[i], fy[i]));
    }
    r = run2("Mod", T(CGE_F16, CGE_SHAPE(3), hx), T(CGE_F16, CGE_SHAPE(3), hy), &f1, 1);
    op_assert_close(&r, CGE_F16, CGE_SHAPE(3), hw, 0, 0);
    op_free_outputs(&r, 1);
    r = run2("Mod", T(CGE_BF16, CGE_SHAPE(3), bx), T(CGE_BF16, CGE_SHAPE(3), by), &f1, 1);
    op_assert_close(&r, CGE_BF16, CGE_SHAPE(3), bw, 0, 0);
    op_free_outputs(&r, 1);
}

static void test_mod_float_needs_fmod(void **state)
{
    const float x[2] = {1, 2};
    cge_tensor in[2] = {T(CGE_F32, CGE_SHAPE(2), x), T(CGE_F32, CGE_SHAPE(2), x)}, out[1];
    op_assert_error(op_run("Mod", in, 2, NULL, 0, out, 1), "[meta]", "fmod = 1");
}

static void test_bitshift_edges(void **state)
{
    const uint8_t x8[4] = {0xff, 1, 0x80, 3}, s8[4] = {8, 7, 1, 200};
    const uint8_t left8[4] = {0, 0x80, 0, 0}, right8[4] = {0, 0, 0x40, 0};
    cge_attr l = CGE_ATTR_S("direction", "LEFT"), r = CGE_ATTR_S("direction", "RIGHT");
    cge_tensor y =
        run2("BitShift", T(CGE_U8, CGE_SHAPE(4), x8), T(CGE_U8, CGE_SHAPE(4), s8), &l, 1);
    op_assert_equal(&y, CGE_U8, CGE_SHAPE(4), left8);
    op_free_outputs(&y, 1);
    y = run2("BitShift", T(CGE_U8, CGE_SHAPE(4), x8), T(CGE_U8, CGE_SHAPE(4), s8), &r, 1);
    op_assert_equal(&y, CGE_U8, CGE_SHAPE(4), right8);
    op_free_outputs(&y, 1);
    const uint64_t x64[3] = {1, UINT64_MAX, 5}, s64[1] = {63};
    const uint64_t w64[3] = {UINT64_C(1) << 63, UINT64_C(1) << 63, UINT64_C(1) << 63};
    y = run2("BitShift", T(CGE_U64, CGE_SHAPE(3), x64), T(CGE_U64, CGE_SHAPE(1), s64), &l, 1);
    op_assert_equal(&y, CGE_U64, CGE_SHAPE(3), w64);
    op_free_outputs(&y, 1);

    cge_attr bad = CGE_ATTR_S("direction", "UP");
    cge_tensor in[2] = {T(CGE_U8, CGE_SHAPE(4), x8), T(CGE_U8, CGE_SHAPE(4), s8)}, out[1];
    op_assert_error(op_run("BitShift", in, 2, &bad, 1, out, 1), "[meta]", "LEFT");
    op_assert_error(op_run("BitShift", in, 2, NULL, 0, out, 1), "[schema]", "direction");
    const int32_t si[1] = {1};
    in[0] = T(CGE_I32, CGE_SHAPE(1), si);
    in[1] = T(CGE_I32, CGE_SHAPE(1), si);
    op_assert_error(op_run("BitShift", in, 2, &l, 1, out, 1), "[meta]", "int32");
}

static void test_bitwise(void **state)
{
    const int16_t a[4] = {-1, 0x0f0f, -32768, 12}, b[4] = {0x00ff, 0x00ff, -1, 10};
    const int16_t wand[4] = {0x00ff, 0x000f, -32768, 8};
    const int16_t wor[4] = {-1, 0x0fff, -1, 14};
    const int16_t wxor[4] = {(int16_t)0xff00, 0x0ff0, 32767, 6};
    struct {
        const char *op;
        const int16_t *want;
    } c[3] = {{"BitwiseAnd", wand}, {"BitwiseOr", wor}, {"BitwiseXor", wxor}};
    for (int i = 0; i < 3; i++) {
        cge_tensor y = run2(c[i].op, T(CGE_I16, CGE_SHAPE(4), a), T(CGE_I16, CGE_SHAPE(4), b),
                            NULL, 0);
        op_assert_equal(&y, CGE_I16, CGE_SHAPE(4), c[i].want);
        op_free_outputs(&y, 1);
    }
    /* broadcast of a scalar over uint64 */
    const uint64_t u[3] = {0xf0, 0x0f, UINT64_MAX}, m[1] = {0x3c};
    const uint64_t wu[3] = {0x30, 0x0c, 0x3c};
    cge_tensor y = run2("BitwiseAnd", T(CGE_U64, CGE_SHAPE(3), u), T(CGE_U64, CGE_SCALAR, m),
                        NULL, 0);
    op_assert_equal(&y, CGE_U64, CGE_SHAPE(3), wu);
    op_free_outputs(&y, 1);
    /* floats are refused */
    const float f[1] = {1};
    cge_tensor in[2] = {T(CGE_F32, CGE_SHAPE(1), f), T(CGE_F32, CGE_SHAPE(1), f)}, out[1];
    op_assert_error(op_run("BitwiseOr", in, 2, NULL, 0, out, 1), "[meta]", "float32");
}

/* Any nonzero byte is true; results are canonical 0/1. */
static void test_logic_truth_values(void **state)
{
    const uint8_t a[4] = {0, 2, 255, 0}, b[4] = {7, 3, 0, 0};
    const uint8_t wand[4] = {0, 1, 0, 0}, wor[4] = {1, 1, 1, 0}, wxor[4] = {1, 0, 1, 0};
    cge_tensor y = run2("And", T(CGE_BOOL, CGE_SHAPE(4), a), T(CGE_BOOL, CGE_SHAPE(4), b), NULL, 0);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(4), wand);
    op_free_outputs(&y, 1);
    y = run2("Or", T(CGE_BOOL, CGE_SHAPE(4), a), T(CGE_BOOL, CGE_SHAPE(4), b), NULL, 0);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(4), wor);
    op_free_outputs(&y, 1);
    y = run2("Xor", T(CGE_BOOL, CGE_SHAPE(4), a), T(CGE_BOOL, CGE_SHAPE(4), b), NULL, 0);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(4), wxor);
    op_free_outputs(&y, 1);
    const float f[1] = {1};
    cge_tensor in[2] = {T(CGE_F32, CGE_SHAPE(1), f), T(CGE_F32, CGE_SHAPE(1), f)}, out[1];
    op_assert_error(op_run("And", in, 2, NULL, 0, out, 1), "[meta]", "float32");
}

static void test_compare_nan_and_types(void **state)
{
    const float a[4] = {1, NAN, 2, -INFINITY}, b[4] = {1, 1, NAN, -INFINITY};
    const uint8_t le[4] = {1, 0, 0, 1}, ge[4] = {1, 0, 0, 1};
    cge_tensor y = run2("LessOrEqual", T(CGE_F32, CGE_SHAPE(4), a), T(CGE_F32, CGE_SHAPE(4), b),
                        NULL, 0);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(4), le);
    op_free_outputs(&y, 1);
    y = run2("GreaterOrEqual", T(CGE_F32, CGE_SHAPE(4), a), T(CGE_F32, CGE_SHAPE(4), b), NULL, 0);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(4), ge);
    op_free_outputs(&y, 1);
    const uint64_t ua[2] = {UINT64_MAX, 0}, ub[2] = {0, UINT64_MAX};
    const uint8_t wu[2] = {0, 1};
    y = run2("LessOrEqual", T(CGE_U64, CGE_SHAPE(2), ua), T(CGE_U64, CGE_SHAPE(2), ub), NULL, 0);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(2), wu);
    op_free_outputs(&y, 1);
    uint16_t h[2] = {cge_f32_to_f16(1.5f), cge_f32_to_f16(-2.0f)};
    uint16_t hb[1] = {cge_f32_to_f16(1.5f)};
    const uint8_t wh[2] = {1, 0};
    y = run2("GreaterOrEqual", T(CGE_F16, CGE_SHAPE(2), h), T(CGE_F16, CGE_SHAPE(1), hb), NULL, 0);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(2), wh);
    op_free_outputs(&y, 1);
    const int32_t i1[1] = {1};
    const int64_t i2[1] = {1};
    cge_tensor in[2] = {T(CGE_I32, CGE_SHAPE(1), i1), T(CGE_I64, CGE_SHAPE(1), i2)}, out[1];
    op_assert_error(op_run("LessOrEqual", in, 2, NULL, 0, out, 1), "[meta]", "one dtype");
}

/* Broadcast paths over several blocks: [3, 7, 1000] against [7, 1], [1000],
 * a scalar, and [3, 1, 1000], checked element by element. */
static void test_broadcast_large(void **state)
{
    enum { A = 3, B = 7, C = 1000, N = A * B * C };
    float *x = malloc(sizeof(float) * N);
    float s71[B], s1000[C], s3[A * C], one[1] = {0.25f};
    assert_non_null(x);
    for (int i = 0; i < N; i++)
        x[i] = (float)((i * 37) % 201 - 100) / 10.0f;
    for (int i = 0; i < B; i++)
        s71[i] = 0.1f * (float)(i + 1);
    for (int i = 0; i < C; i++)
        s1000[i] = (float)(i % 13) - 6.0f;
    for (int i = 0; i < A * C; i++)
        s3[i] = (float)(i % 5) / 4.0f;
    struct {
        cge_shape shape;
        const float *s;
    } slopes[4] = {{CGE_SHAPE(B, 1), s71}, {CGE_SHAPE(C), s1000}, {CGE_SCALAR, one},
                   {CGE_SHAPE(A, 1, C), s3}};
    for (int k = 0; k < 4; k++) {
        cge_tensor y = run2("PRelu", T(CGE_F32, CGE_SHAPE(A, B, C), x),
                            T(CGE_F32, slopes[k].shape, slopes[k].s), NULL, 0);
        op_assert_shape(&y, CGE_SHAPE(A, B, C));
        const float *o = y.data;
        for (int a = 0; a < A; a++)
            for (int b = 0; b < B; b++)
                for (int c = 0; c < C; c++) {
                    int i = (a * B + b) * C + c;
                    float s = k == 0 ? s71[b] : k == 1 ? s1000[c] : k == 2 ? one[0]
                                                                          : s3[a * C + c];
                    float w = x[i] < 0 ? s * x[i] : x[i];
                    if (o[i] != w)
                        fail_msg("slope %d, element %d: %g, expected %g", k, i, o[i], w);
                }
        op_free_outputs(&y, 1);
        /* GreaterOrEqual both ways round, broadcasting multidirectionally */
        y = run2("GreaterOrEqual", T(CGE_F32, slopes[k].shape, slopes[k].s),
                 T(CGE_F32, CGE_SHAPE(A, B, C), x), NULL, 0);
        const uint8_t *g = y.data;
        for (int a = 0; a < A; a++)
            for (int b = 0; b < B; b++)
                for (int c = 0; c < C; c++) {
                    int i = (a * B + b) * C + c;
                    float s = k == 0 ? s71[b] : k == 1 ? s1000[c] : k == 2 ? one[0]
                                                                          : s3[a * C + c];
                    if (g[i] != (s >= x[i]))
                        fail_msg("GreaterOrEqual %d, element %d", k, i);
                }
        op_free_outputs(&y, 1);
    }
    free(x);
}

static void test_prelu_types_and_shapes(void **state)
{
    const int32_t x[4] = {-4, 3, -1, 0}, s[2] = {2, -3};
    const int32_t w[4] = {-8, 3, -2, 0};
    cge_tensor y = run2("PRelu", T(CGE_I32, CGE_SHAPE(2, 2), x), T(CGE_I32, CGE_SHAPE(2), s),
                        NULL, 0);
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(2, 2), w);
    op_free_outputs(&y, 1);
    uint16_t hx[3] = {cge_f32_to_f16(-2.0f), cge_f32_to_f16(1.0f), cge_f32_to_f16(-0.5f)};
    uint16_t hs[1] = {cge_f32_to_f16(0.25f)};
    uint16_t hw[3] = {cge_f32_to_f16(-0.5f), hx[1], cge_f32_to_f16(-0.125f)};
    y = run2("PRelu", T(CGE_F16, CGE_SHAPE(3), hx), T(CGE_F16, CGE_SHAPE(1), hs), NULL, 0);
    op_assert_equal(&y, CGE_F16, CGE_SHAPE(3), hw);
    op_free_outputs(&y, 1);
    /* the slope broadcasts to X, never X to the slope */
    const float fx[2] = {1, 2}, fs[6] = {0};
    cge_tensor in[2] = {T(CGE_F32, CGE_SHAPE(2), fx), T(CGE_F32, CGE_SHAPE(3, 2), fs)}, out[1];
    op_assert_error(op_run("PRelu", in, 2, NULL, 0, out, 1), "[meta]", "unidirectionally");
    in[1] = T(CGE_F32, CGE_SHAPE(3), fs);
    op_assert_error(op_run("PRelu", in, 2, NULL, 0, out, 1), "[meta]", "slope");
    const int8_t i8[1] = {1};
    in[0] = T(CGE_I8, CGE_SHAPE(1), i8);
    in[1] = T(CGE_I8, CGE_SHAPE(1), i8);
    op_assert_error(op_run("PRelu", in, 2, NULL, 0, out, 1), "[meta]", "int8");
}

static void test_meta_shapes(void **state)
{
    cge_tensor_desc in[2] = {{.name = "a", .dtype = CGE_F32, .shape = CGE_SHAPE(4, 1, 3)},
                             {.name = "b", .dtype = CGE_F32, .shape = CGE_SHAPE(5, 1)}};
    cge_tensor_desc out[1] = {{.name = "c"}};
    assert_int_equal(op_infer("LessOrEqual", in, NULL, 2, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].dtype, CGE_BOOL);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(4, 5, 3)));
    in[1].shape = CGE_SHAPE(2, 4);
    op_assert_error(op_infer("GreaterOrEqual", in, NULL, 2, NULL, 0, out, 1), "[meta]",
                    "do not broadcast");
    /* PRelu with a dynamic dim keeps X's shape */
    in[0].shape = CGE_SHAPE(CGE_DIM_DYNAMIC, 3);
    in[1].shape = CGE_SHAPE(3);
    assert_int_equal(op_infer("PRelu", in, NULL, 2, NULL, 0, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &in[0].shape));
    assert_int_equal(out[0].dtype, CGE_F32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onnx_cases),
        cmocka_unit_test(test_mod_integers),
        cmocka_unit_test(test_mod_float_needs_fmod),
        cmocka_unit_test(test_bitshift_edges),
        cmocka_unit_test(test_bitwise),
        cmocka_unit_test(test_logic_truth_values),
        cmocka_unit_test(test_compare_nan_and_types),
        cmocka_unit_test(test_broadcast_large),
        cmocka_unit_test(test_prelu_types_and_shapes),
        cmocka_unit_test(test_meta_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
