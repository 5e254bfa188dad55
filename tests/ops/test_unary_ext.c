/* Tests of the unary_ext family (Floor Ceil Round Sign IsNaN IsInf Not
 * BitwiseNot, trigonometric and hyperbolic functions, activations, Clip,
 * Dropout, Hardmax): onnx 1.12's node test cases (unary_ext_fixtures.h),
 * then dtypes, special values and edge cases by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "op_runner.h"
#include "unary_ext_fixtures.h"

#define NCASES (sizeof unary_ext_cases / sizeof unary_ext_cases[0])

static cge_tensor T(cge_dtype dt, cge_shape s, const void *d) { return op_tensor(dt, s, d); }

static cge_tensor run1a(const char *op, cge_tensor x, const cge_attr *attrs, int32_t nattrs)
{
    cge_tensor out[1];
    cge_status st = op_run(op, &x, 1, attrs, nattrs, out, 1);
    if (st)
        fail_msg("%s failed: %s", op, cge_last_error());
    return out[0];
}

static cge_tensor run1(const char *op, cge_tensor x) { return run1a(op, x, NULL, 0); }

static void test_onnx_cases(void **state)
{
    static const char *const ops[] = {
        "Not", "Floor", "Ceil", "Round", "Sign", "IsNaN", "IsInf", "Sin", "Cos", "Tan",
        "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Softplus",
        "Softsign", "Elu", "Selu", "Celu", "ThresholdedRelu", "HardSigmoid", "HardSwish",
        "Shrink", "Clip", "Dropout", "Hardmax"};
    int total = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int n = ew2_run_cases(unary_ext_cases, NCASES, ops[i]);
        if (n == 0)
            fail_msg("no onnx cases for %s", ops[i]);
        total += n;
    }
    assert_int_equal(total, (int)NCASES);
}

static void test_round_half_even_and_rounding(void **state)
{
    const float x[10] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 2.4999998f, -0.2f, NAN, -INFINITY};
    const float wr[10] = {0.0f, 2.0f, 2.0f, -0.0f, -2.0f, -2.0f, 2.0f, -0.0f, NAN, -INFINITY};
    const float wf[10] = {0, 1, 2, -1, -2, -3, 2, -1, NAN, -INFINITY};
    const float wc[10] = {1, 2, 3, -0.0f, -1, -2, 3, -0.0f, NAN, -INFINITY};
    cge_tensor y = run1("Round", T(CGE_F32, CGE_SHAPE(10), x));
    op_assert_close(&y, CGE_F32, CGE_SHAPE(10), wr, 0, 0);
    assert_true(signbit(((float *)y.data)[3]));
    op_free_outputs(&y, 1);
    y = run1("Floor", T(CGE_F32, CGE_SHAPE(2, 5), x));
    op_assert_close(&y, CGE_F32, CGE_SHAPE(2, 5), wf, 0, 0);
    op_free_outputs(&y, 1);
    y = run1("Ceil", T(CGE_F32, CGE_SHAPE(10), x));
    op_assert_close(&y, CGE_F32, CGE_SHAPE(10), wc, 0, 0);
    op_free_outputs(&y, 1);
    const double xd[3] = {2.5, 3.5, -4.5}, wd[3] = {2, 4, -4};
    y = run1("Round", T(CGE_F64, CGE_SHAPE(3), xd));
    op_assert_equal(&y, CGE_F64, CGE_SHAPE(3), wd);
    op_free_outputs(&y, 1);
    uint16_t h[3] = {cge_f32_to_f16(0.5f), cge_f32_to_f16(1.5f), cge_f32_to_f16(-2.5f)};
    uint16_t wh[3] = {cge_f32_to_f16(0.0f), cge_f32_to_f16(2.0f), cge_f32_to_f16(-2.0f)};
    y = run1("Round", T(CGE_F16, CGE_SHAPE(3), h));
    op_assert_close(&y, CGE_F16, CGE_SHAPE(3), wh, 0, 0);
    op_free_outputs(&y, 1);
}

static void test_sign_types(void **state)
{
    const float f[5] = {-3.5f, 0.0f, -0.0f, NAN, 1e-30f};
    const float wf[5] = {-1, 0, 0, NAN, 1};
    cge_tensor y = run1("Sign", T(CGE_F32, CGE_SHAPE(5), f));
    op_assert_close(&y, CGE_F32, CGE_SHAPE(5), wf, 0, 0);
    op_free_outputs(&y, 1);
    const int64_t i[4] = {INT64_MIN, -1, 0, 5}, wi[4] = {-1, -1, 0, 1};
    y = run1("Sign", T(CGE_I64, CGE_SHAPE(4), i));
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(4), wi);
    op_free_outputs(&y, 1);
    const uint8_t u[3] = {0, 1, 255}, wu[3] = {0, 1, 1};
    y = run1("Sign", T(CGE_U8, CGE_SHAPE(3), u));
    op_assert_equal(&y, CGE_U8, CGE_SHAPE(3), wu);
    op_free_outputs(&y, 1);
    cge_tensor out[1];
    const uint8_t b[1] = {1};
    cge_tensor in = T(CGE_BOOL, CGE_SHAPE(1), b);
    op_assert_error(op_run("Sign", &in, 1, NULL, 0, out, 1), "[meta]", "bool");
}

static void test_isnan_isinf(void **state)
{
    const double x[5] = {NAN, INFINITY, -INFINITY, 0, 1e308};
    const uint8_t wnan[5] = {1, 0, 0, 0, 0};
    const uint8_t wall[5] = {0, 1, 1, 0, 0}, wneg[5] = {0, 0, 1, 0, 0}, wnone[5] = {0};
    cge_tensor y = run1("IsNaN", T(CGE_F64, CGE_SHAPE(5), x));
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(5), wnan);
    op_free_outputs(&y, 1);
    y = run1("IsInf", T(CGE_F64, CGE_SHAPE(5), x));
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(5), wall);
    op_free_outputs(&y, 1);
    cge_attr a[2] = {CGE_ATTR_I("detect_positive", 0), CGE_ATTR_I("detect_negative", 0)};
    y = run1a("IsInf", T(CGE_F64, CGE_SHAPE(5), x), a, 1);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(5), wneg);
    op_free_outputs(&y, 1);
    y = run1a("IsInf", T(CGE_F64, CGE_SHAPE(5), x), a, 2);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(5), wnone);
    op_free_outputs(&y, 1);
    uint16_t h[5];
    for (int i = 0; i < 5; i++)
        h[i] = cge_f32_to_f16((float)x[i]); /* 1e308 becomes +inf in float16 */
    const uint8_t wh[5] = {0, 1, 1, 0, 1};
    y = run1("IsInf", T(CGE_F16, CGE_SHAPE(5), h));
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(5), wh);
    op_free_outputs(&y, 1);
    y = run1("IsNaN", T(CGE_F16, CGE_SHAPE(5), h));
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(5), wnan);
    op_free_outputs(&y, 1);
}

static void test_not_and_bitwise_not(void **state)
{
    const uint8_t b[4] = {0, 1, 2, 255}, wb[4] = {1, 0, 0, 0};
    cge_tensor y = run1("Not", T(CGE_BOOL, CGE_SHAPE(4), b));
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(4), wb);
    op_free_outputs(&y, 1);
    const int32_t i[3] = {0, -1, 5}, wi[3] = {-1, 0, -6};
    y = run1("BitwiseNot", T(CGE_I32, CGE_SHAPE(3), i));
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(3), wi);
    op_free_outputs(&y, 1);
    const uint16_t u[2] = {0, 0x00ff}, wu[2] = {0xffff, 0xff00};
    y = run1("BitwiseNot", T(CGE_U16, CGE_SHAPE(2), u));
    op_assert_equal(&y, CGE_U16, CGE_SHAPE(2), wu);
    op_free_outputs(&y, 1);
    cge_tensor out[1];
    const float f[1] = {1};
    cge_tensor in = T(CGE_F32, CGE_SHAPE(1), f);
    op_assert_error(op_run("Not", &in, 1, NULL, 0, out, 1), "[meta]", "float32");
    op_assert_error(op_run("BitwiseNot", &in, 1, NULL, 0, out, 1), "[meta]", "float32");
}

static void test_mish_vs_numpy(void **state)
{
    cge_tensor y = run1("Mish", T(CGE_F32, CGE_SHAPE(8, 8), mish_x));
    op_assert_close(&y, CGE_F32, CGE_SHAPE(8, 8), mish_f32, 2e-6, 1e-7);
    op_free_outputs(&y, 1);
    double xd[64];
    for (int i = 0; i < 64; i++)
        xd[i] = mish_x[i];
    y = run1("Mish", T(CGE_F64, CGE_SHAPE(64), xd));
    op_assert_close(&y, CGE_F64, CGE_SHAPE(64), mish_f64, 1e-13, 1e-300);
    op_free_outputs(&y, 1);
}

/* Activations at the extremes, where naive formulas overflow or cancel. */
static void test_activation_extremes(void **state)
{
    const float x[5] = {-1000.0f, -1e-4f, 0.0f, 1e-4f, 1000.0f};
    const float wsp[5] = {0.0f, 0.69309718f, 0.69314718f, 0.69319718f, 1000.0f};
    cge_tensor y = run1("Softplus", T(CGE_F32, CGE_SHAPE(5), x));
    op_assert_close(&y, CGE_F32, CGE_SHAPE(5), wsp, 1e-6, 0);
    op_free_outputs(&y, 1);
    const float welu[5] = {-1.0f, -9.9995e-05f, 0.0f, 1e-4f, 1000.0f};
    y = run1("Elu", T(CGE_F32, CGE_SHAPE(5), x));
    op_assert_close(&y, CGE_F32, CGE_SHAPE(5), welu, 1e-6, 0);
    op_free_outputs(&y, 1);
    const float wss[5] = {-1000.0f / 1001.0f, -1e-4f / (1 + 1e-4f), 0, 1e-4f / (1 + 1e-4f),
                          1000.0f / 1001.0f};
    y = run1("Softsign", T(CGE_F32, CGE_SHAPE(5), x));
    op_assert_close(&y, CGE_F32, CGE_SHAPE(5), wss, 1e-6, 0);
    op_free_outputs(&y, 1);
    const float nan_in[2] = {NAN, -INFINITY};
    const float wnan[2] = {NAN, 0.0f};
    y = run1("HardSigmoid", T(CGE_F32, CGE_SHAPE(2), nan_in));
    op_assert_close(&y, CGE_F32, CGE_SHAPE(2), wnan, 0, 0);
    op_free_outputs(&y, 1);
    const float whsw[2] = {NAN, NAN}; /* -inf * 0, as the reference formula gives */
    y = run1("HardSwish", T(CGE_F32, CGE_SHAPE(2), nan_in));
    op_assert_close(&y, CGE_F32, CGE_SHAPE(2), whsw, 0, 0);
    op_free_outputs(&y, 1);
    cge_attr zero = CGE_ATTR_F("alpha", 0.0f);
    cge_tensor out[1];
    cge_tensor in = T(CGE_F32, CGE_SHAPE(5), x);
    op_assert_error(op_run("Celu", &in, 1, &zero, 1, out, 1), "[meta]", "alpha");
}

/* bfloat16 / float16 paths of the activations: computed through float32. */
static void test_half_activations(void **state)
{
    const char *ops[] = {"Selu", "HardSwish", "Sin", "Atan", "Softplus", "Shrink"};
    const float x[6] = {-2.0f, -0.75f, -0.25f, 0.5f, 1.0f, 3.0f};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        cge_tensor r = run1(ops[k], T(CGE_F32, CGE_SHAPE(6), x));
        uint16_t hx[6], bx[6], wh[6], wb[6];
        for (int i = 0; i < 6; i++) {
            hx[i] = cge_f32_to_f16(x[i]); /* exact in both */
            bx[i] = cge_f32_to_bf16(x[i]);
            wh[i] = cge_f32_to_f16(((float *)r.data)[i]);
            wb[i] = cge_f32_to_bf16(((float *)r.data)[i]);
        }
        op_free_outputs(&r, 1);
        cge_tensor y = run1(ops[k], T(CGE_F16, CGE_SHAPE(6), hx));
        op_assert_equal(&y, CGE_F16, CGE_SHAPE(6), wh);
        op_free_outputs(&y, 1);
        y = run1(ops[k], T(CGE_BF16, CGE_SHAPE(6), bx));
        op_assert_equal(&y, CGE_BF16, CGE_SHAPE(6), wb);
        op_free_outputs(&y, 1);
    }
}

static void test_shrink_integers(void **state)
{
    const int32_t x[5] = {-5, -1, 0, 1, 5};
    cge_attr a[2] = {CGE_ATTR_F("lambd", 1.5f), CGE_ATTR_F("bias", 1.5f)};
    const int32_t w[5] = {-3, 0, 0, 0, 3}; /* -5 + 1.5 = -3.5 -> -3 (truncated) */
    cge_tensor y = run1a("Shrink", T(CGE_I32, CGE_SHAPE(5), x), a, 2);
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(5), w);
    op_free_outputs(&y, 1);
}

static cge_tensor clip(cge_tensor x, cge_tensor lo, cge_tensor hi)
{
    cge_tensor in[3] = {x, lo, hi}, out[1];
    cge_status st = op_run("Clip", in, 3, NULL, 0, out, 1);
    if (st)
        fail_msg("Clip failed: %s", cge_last_error());
    return out[0];
}

static void test_clip_types(void **state)
{
    const uint8_t u[4] = {0, 10, 200, 255}, ulo[1] = {5}, uhi[1] = {201};
    const uint8_t wu[4] = {5, 10, 200, 201}, wlo[4] = {5, 10, 200, 255};
    cge_tensor y = clip(T(CGE_U8, CGE_SHAPE(4), u), T(CGE_U8, CGE_SCALAR, ulo),
                        T(CGE_U8, CGE_SCALAR, uhi));
    op_assert_equal(&y, CGE_U8, CGE_SHAPE(4), wu);
    op_free_outputs(&y, 1);
    y = clip(T(CGE_U8, CGE_SHAPE(4), u), T(CGE_U8, CGE_SCALAR, ulo), op_absent());
    op_assert_equal(&y, CGE_U8, CGE_SHAPE(4), wlo);
    op_free_outputs(&y, 1);
    /* min > max gives max everywhere (numpy's clip); NaN stays NaN */
    const float f[4] = {-5, 0, 5, NAN}, flo[1] = {2}, fhi[1] = {1};
    const float wf[4] = {1, 1, 1, NAN};
    y = clip(T(CGE_F32, CGE_SHAPE(2, 2), f), T(CGE_F32, CGE_SHAPE(1), flo),
             T(CGE_F32, CGE_SCALAR, fhi));
    op_assert_close(&y, CGE_F32, CGE_SHAPE(2, 2), wf, 0, 0);
    op_free_outputs(&y, 1);
    /* no bounds: a copy, for int64 extremes too */
    const int64_t i[3] = {INT64_MIN, 0, INT64_MAX};
    y = clip(T(CGE_I64, CGE_SHAPE(3), i), op_absent(), op_absent());
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(3), i);
    op_free_outputs(&y, 1);
    uint16_t h[3] = {cge_f32_to_f16(-3), cge_f32_to_f16(0.5f), cge_f32_to_f16(9)};
    uint16_t hlo[1] = {cge_f32_to_f16(-1)}, hhi[1] = {cge_f32_to_f16(1)};
    uint16_t wh[3] = {hlo[0], h[1], hhi[0]};
    y = clip(T(CGE_F16, CGE_SHAPE(3), h), T(CGE_F16, CGE_SCALAR, hlo),
             T(CGE_F16, CGE_SCALAR, hhi));
    op_assert_equal(&y, CGE_F16, CGE_SHAPE(3), wh);
    op_free_outputs(&y, 1);
    uint16_t b[3] = {cge_f32_to_bf16(-3), cge_f32_to_bf16(0.5f), cge_f32_to_bf16(9)};
    uint16_t bhi[1] = {cge_f32_to_bf16(1)};
    uint16_t wb[3] = {b[0], b[1], bhi[0]};
    y = clip(T(CGE_BF16, CGE_SHAPE(3), b), op_absent(), T(CGE_BF16, CGE_SCALAR, bhi));
    op_assert_equal(&y, CGE_BF16, CGE_SHAPE(3), wb);
    op_free_outputs(&y, 1);
    /* bounds must be scalars of the input's dtype */
    cge_tensor in[3] = {T(CGE_F32, CGE_SHAPE(4), f), T(CGE_F32, CGE_SHAPE(2), f), op_absent()};
    cge_tensor out[1];
    op_assert_error(op_run("Clip", in, 3, NULL, 0, out, 1), "[meta]", "scalar");
    in[1] = T(CGE_F64, CGE_SCALAR, f);
    op_assert_error(op_run("Clip", in, 3, NULL, 0, out, 1), "[meta]", "float64");
}

/* Many blocks: Clip and HardSigmoid over 200000 floats against scalar code. */
static void test_large_clip_hardsigmoid(void **state)
{
    enum { N = 200000 };
    float *x = malloc(sizeof(float) * N);
    assert_non_null(x);
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 2001 - 1000) / 100.0f;
    const float lo[1] = {-2.5f}, hi[1] = {3.25f};
    cge_tensor y = clip(T(CGE_F32, CGE_SHAPE(N), x), T(CGE_F32, CGE_SCALAR, lo),
                        T(CGE_F32, CGE_SCALAR, hi));
    cge_tensor h = run1("HardSigmoid", T(CGE_F32, CGE_SHAPE(100, 2000), x));
    const float *oy = y.data, *oh = h.data;
    for (int i = 0; i < N; i++) {
        float w = x[i] < lo[0] ? lo[0] : x[i] > hi[0] ? hi[0] : x[i];
        float v = 0.2f * x[i] + 0.5f;
        float wh = v < 0 ? 0 : v > 1 ? 1 : v;
        if (oy[i] != w || oh[i] != wh)
            fail_msg("element %d: Clip %g (want %g), HardSigmoid %g (want %g)", i, oy[i], w,
                     oh[i], wh);
    }
    op_free_outputs(&y, 1);
    op_free_outputs(&h, 1);
    free(x);
}

static void test_dropout(void **state)
{
    const float x[6] = {1, -2, 3, -4, 5, -6};
    const uint8_t ones[6] = {1, 1, 1, 1, 1, 1};
    const float ratio[1] = {0.7f};
    const uint8_t f[1] = {0}, t[1] = {1};
    /* inference (training_mode false): identity, mask all true, any ratio */
    cge_tensor in[3] = {T(CGE_F32, CGE_SHAPE(2, 3), x), T(CGE_F32, CGE_SCALAR, ratio),
                        T(CGE_BOOL, CGE_SCALAR, f)};
    cge_tensor out[2];
    assert_int_equal(op_run("Dropout", in, 3, NULL, 0, out, 2), CGE_OK);
    op_assert_equal(&out[0], CGE_F32, CGE_SHAPE(2, 3), x);
    op_assert_equal(&out[1], CGE_BOOL, CGE_SHAPE(2, 3), ones);
    op_free_outputs(out, 2);
    /* training with ratio 0 is the identity too; with ratio > 0 refused */
    const float zero[1] = {0};
    in[1] = T(CGE_F32, CGE_SCALAR, zero);
    in[2] = T(CGE_BOOL, CGE_SCALAR, t);
    assert_int_equal(op_run("Dropout", in, 3, NULL, 0, out, 1), CGE_OK);
    op_assert_equal(&out[0], CGE_F32, CGE_SHAPE(2, 3), x);
    op_free_outputs(out, 1);
    in[1] = op_absent(); /* default ratio 0.5 */
    op_assert_error(op_run("Dropout", in, 3, NULL, 0, out, 2), "[meta]", "not supported");
    /* float64 and bfloat16 data */
    const double xd[2] = {1.5, -2.5};
    cge_tensor d = T(CGE_F64, CGE_SHAPE(2), xd);
    assert_int_equal(op_run("Dropout", &d, 1, NULL, 0, out, 2), CGE_OK);
    op_assert_equal(&out[0], CGE_F64, CGE_SHAPE(2), xd);
    op_assert_equal(&out[1], CGE_BOOL, CGE_SHAPE(2), ones);
    op_free_outputs(out, 2);

    /* meta: training_mode unknown at compile time -> dynamic dims (decided at
     * run time); known false -> static */
    cge_tensor_desc din[3] = {{.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 3)},
                              {.name = "r", .dtype = CGE_F32, .shape = CGE_SCALAR},
                              {.name = "t", .dtype = CGE_BOOL, .shape = CGE_SCALAR}};
    cge_tensor_desc dout[2] = {{.name = "y"}, {.name = "m"}};
    assert_int_equal(op_infer("Dropout", din, NULL, 3, NULL, 0, dout, 2), CGE_OK);
    assert_false(cge_shape_is_static(&dout[0].shape));
    assert_int_equal(dout[0].shape.rank, 2);
    assert_int_equal(dout[1].dtype, CGE_BOOL);
    const void *vals[3] = {NULL, NULL, f};
    assert_int_equal(op_infer("Dropout", din, vals, 3, NULL, 0, dout, 2), CGE_OK);
    assert_true(cge_shape_equal(&dout[0].shape, &din[0].shape));
    assert_true(cge_shape_equal(&dout[1].shape, &din[0].shape));
    /* training true, ratio unknown: dynamic as well */
    vals[2] = t;
    assert_int_equal(op_infer("Dropout", din, vals, 3, NULL, 0, dout, 1), CGE_OK);
    assert_false(cge_shape_is_static(&dout[0].shape));
    /* no training_mode: inference, static */
    assert_int_equal(op_infer("Dropout", din, NULL, 2, NULL, 0, dout, 2), CGE_OK);
    assert_true(cge_shape_is_static(&dout[0].shape));
    din[0].dtype = CGE_I32;
    op_assert_error(op_infer("Dropout", din, NULL, 1, NULL, 0, dout, 1), "[meta]", "int32");
}

static void test_hardmax(void **state)
{
    /* ties go to the first maximum; NaN counts as the maximum */
    const double x[8] = {1, 3, 3, 0, 2, NAN, 5, NAN};
    const double w1[8] = {0, 1, 0, 0, 0, 1, 0, 0};
    cge_tensor y = run1("Hardmax", T(CGE_F64, CGE_SHAPE(2, 4), x));
    op_assert_equal(&y, CGE_F64, CGE_SHAPE(2, 4), w1);
    op_free_outputs(&y, 1);
    /* axis 0 of [2, 4]: per column; NaN wins in columns 1 and 3 */
    cge_attr ax = CGE_ATTR_I("axis", 0);
    const double w0[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    y = run1a("Hardmax", T(CGE_F64, CGE_SHAPE(2, 4), x), &ax, 1);
    op_assert_equal(&y, CGE_F64, CGE_SHAPE(2, 4), w0);
    op_free_outputs(&y, 1);
    uint16_t h[4] = {cge_f32_to_f16(-1), cge_f32_to_f16(-0.5f), cge_f32_to_f16(-3),
                     cge_f32_to_f16(-0.5f)};
    const uint16_t wh[4] = {0, 0x3c00, 0, 0};
    y = run1("Hardmax", T(CGE_F16, CGE_SHAPE(4), h));
    op_assert_equal(&y, CGE_F16, CGE_SHAPE(4), wh);
    op_free_outputs(&y, 1);
    ax = CGE_ATTR_I("axis", 2);
    cge_tensor in = T(CGE_F64, CGE_SHAPE(2, 4), x), out[1];
    op_assert_error(op_run("Hardmax", &in, 1, &ax, 1, out, 1), "[meta]", "axis");
}

static void test_dtype_errors(void **state)
{
    const int32_t i[1] = {1};
    cge_tensor in = T(CGE_I32, CGE_SHAPE(1), i), out[1];
    const char *float_only[] = {"Floor", "Sin", "Acosh", "Elu", "HardSwish", "Mish", "IsNaN",
                                "Hardmax", "Softplus"};
    for (size_t k = 0; k < sizeof float_only / sizeof float_only[0]; k++)
        op_assert_error(op_run(float_only[k], &in, 1, NULL, 0, out, 1), "[meta]", "int32");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onnx_cases),
        cmocka_unit_test(test_round_half_even_and_rounding),
        cmocka_unit_test(test_sign_types),
        cmocka_unit_test(test_isnan_isinf),
        cmocka_unit_test(test_not_and_bitwise_not),
        cmocka_unit_test(test_mish_vs_numpy),
        cmocka_unit_test(test_activation_extremes),
        cmocka_unit_test(test_half_activations),
        cmocka_unit_test(test_shrink_integers),
        cmocka_unit_test(test_clip_types),
        cmocka_unit_test(test_large_clip_hardsigmoid),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_hardmax),
        cmocka_unit_test(test_dtype_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
