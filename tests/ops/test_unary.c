/* Tests of the elementwise unary family (Neg Abs Exp Log Sqrt Reciprocal Relu
 * LeakyRelu Sigmoid Tanh Erf Gelu Cast Identity) against numpy references
 * (ew_unary_fixtures.h) and hand values. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ew_unary_fixtures.h"
#include "op_runner.h"

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

static cge_tensor cast(cge_tensor x, cge_dtype to)
{
    cge_attr a = {.name = "to", .kind = CGE_ATTR_INT, .i = to};
    return run1a("Cast", x, &a, 1);
}

/* One float op against its numpy reference, in float32 and float64. */
typedef struct float_case {
    const char *op;
    const char *attr; /* NULL, "alpha" (LeakyRelu 0.1) or a Gelu approximate value */
    const float *in;
    const float *want32;
    const double *want64;
} float_case;

static const float_case float_cases[] = {
    {"Exp", NULL, un_x, un_exp_f32, un_exp_f64},
    {"Sigmoid", NULL, un_x, un_sigmoid_f32, un_sigmoid_f64},
    {"Tanh", NULL, un_x, un_tanh_f32, un_tanh_f64},
    {"Erf", NULL, un_x, un_erf_f32, un_erf_f64},
    {"Gelu", NULL, un_x, un_gelu_f32, un_gelu_f64},
    {"Gelu", "none", un_x, un_gelu_f32, un_gelu_f64},
    {"Gelu", "tanh", un_x, un_gelu_tanh_f32, un_gelu_tanh_f64},
    {"Relu", NULL, un_x, un_relu_f32, un_relu_f64},
    {"LeakyRelu", "alpha", un_x, un_leaky_f32, un_leaky_f64},
    {"Neg", NULL, un_x, un_neg_f32, un_neg_f64},
    {"Abs", NULL, un_x, un_abs_f32, un_abs_f64},
    {"Log", NULL, un_p, un_log_f32, un_log_f64},
    {"Sqrt", NULL, un_p, un_sqrt_f32, un_sqrt_f64},
    {"Reciprocal", NULL, un_p, un_recip_f32, un_recip_f64},
};

static void test_float_ops_vs_numpy(void **state)
{
    double in64[64];
    for (size_t c = 0; c < sizeof float_cases / sizeof float_cases[0]; c++) {
        const float_case *fc = &float_cases[c];
        cge_attr attr;
        int32_t na = 0;
        if (fc->attr && !strcmp(fc->attr, "alpha")) {
            attr = (cge_attr){.name = "alpha", .kind = CGE_ATTR_FLOAT, .f = 0.1f};
            na = 1;
        } else if (fc->attr) {
            attr = (cge_attr){.name = "approximate", .kind = CGE_ATTR_STRING, .s = fc->attr};
            na = 1;
        }
        /* [4,16]: the shape passes through. */
        cge_tensor y = run1a(fc->op, T(CGE_F32, CGE_SHAPE(4, 16), fc->in), &attr, na);
        op_assert_close(&y, CGE_F32, CGE_SHAPE(4, 16), fc->want32, 1e-6, 1e-37);
        op_free_outputs(&y, 1);
        for (int i = 0; i < 64; i++)
            in64[i] = fc->in[i];
        y = run1a(fc->op, T(CGE_F64, CGE_SHAPE(64), in64), &attr, na);
        op_assert_close(&y, CGE_F64, CGE_SHAPE(64), fc->want64, 1e-13, 1e-300);
        op_free_outputs(&y, 1);
    }
}

static void test_leaky_default_alpha(void **state)
{
    const float x[3] = {-2.0f, 0.0f, 3.0f};
    cge_tensor y = run1("LeakyRelu", T(CGE_F32, CGE_SHAPE(3), x));
    const float w[3] = {-2.0f * 0.01f, 0.0f, 3.0f};
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3), w);
    op_free_outputs(&y, 1);
}

static void test_special_values(void **state)
{
    const float x[4] = {-INFINITY, INFINITY, NAN, 0.0f};
    cge_tensor t = T(CGE_F32, CGE_SHAPE(4), x);
    struct {
        const char *op;
        float want[4];
    } cases[] = {
        {"Exp", {0.0f, INFINITY, NAN, 1.0f}},
        {"Sigmoid", {0.0f, 1.0f, NAN, 0.5f}},
        {"Tanh", {-1.0f, 1.0f, NAN, 0.0f}},
        {"Erf", {-1.0f, 1.0f, NAN, 0.0f}},
        {"Relu", {0.0f, INFINITY, NAN, 0.0f}},
        {"Reciprocal", {-0.0f, 0.0f, NAN, INFINITY}},
        {"Abs", {INFINITY, INFINITY, NAN, 0.0f}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cge_tensor y = run1(cases[c].op, t);
        op_assert_close(&y, CGE_F32, CGE_SHAPE(4), cases[c].want, 0, 0);
        op_free_outputs(&y, 1);
    }
    const float p[3] = {0.0f, -1.0f, INFINITY};
    cge_tensor y = run1("Log", T(CGE_F32, CGE_SHAPE(3), p));
    const float wl[3] = {-INFINITY, NAN, INFINITY};
    op_assert_close(&y, CGE_F32, CGE_SHAPE(3), wl, 0, 0);
    op_free_outputs(&y, 1);
    y = run1("Sqrt", T(CGE_F32, CGE_SHAPE(3), p));
    const float ws[3] = {0.0f, NAN, INFINITY};
    op_assert_close(&y, CGE_F32, CGE_SHAPE(3), ws, 0, 0);
    op_free_outputs(&y, 1);
}

static void test_half_types(void **state)
{
    cge_tensor y = run1("Exp", T(CGE_F16, CGE_SHAPE(16), un_xh));
    op_assert_close(&y, CGE_F16, CGE_SHAPE(16), un_h_exp, 1e-3, 0);
    op_free_outputs(&y, 1);
    y = run1("Gelu", T(CGE_F16, CGE_SHAPE(2, 8), un_xh));
    op_assert_close(&y, CGE_F16, CGE_SHAPE(2, 8), un_h_gelu, 1e-3, 1e-7);
    op_free_outputs(&y, 1);

    uint16_t b[4] = {cge_f32_to_bf16(-1.5f), cge_f32_to_bf16(0.0f), cge_f32_to_bf16(2.0f),
                     cge_f32_to_bf16(-0.25f)};
    y = run1("Relu", T(CGE_BF16, CGE_SHAPE(4), b));
    const uint16_t wr[4] = {cge_f32_to_bf16(0.0f), b[1], b[2], cge_f32_to_bf16(0.0f)};
    op_assert_equal(&y, CGE_BF16, CGE_SHAPE(4), wr);
    op_free_outputs(&y, 1);
    y = run1("Sigmoid", T(CGE_BF16, CGE_SHAPE(4), b));
    const uint16_t *o = y.data;
    assert_true(cge_bf16_to_f32(o[1]) == 0.5f);
    assert_true(fabsf(cge_bf16_to_f32(o[2]) - 0.880797f) < 4e-3f);
    op_free_outputs(&y, 1);
    y = run1("Neg", T(CGE_BF16, CGE_SHAPE(4), b));
    o = y.data;
    assert_true(cge_bf16_to_f32(o[0]) == 1.5f && cge_bf16_to_f32(o[3]) == 0.25f);
    op_free_outputs(&y, 1);
}

static void test_int_ops(void **state)
{
    const int32_t a[4] = {INT32_MIN, -5, 0, 7};
    cge_tensor t = T(CGE_I32, CGE_SHAPE(4), a);
    cge_tensor y = run1("Neg", t);
    const int32_t neg[4] = {INT32_MIN, 5, 0, -7};
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(4), neg);
    op_free_outputs(&y, 1);
    y = run1("Abs", t);
    const int32_t ab[4] = {INT32_MIN, 5, 0, 7};
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(4), ab);
    op_free_outputs(&y, 1);
    y = run1("Relu", t);
    const int32_t re[4] = {0, 0, 0, 7};
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(4), re);
    op_free_outputs(&y, 1);

    const int8_t b[3] = {-128, -1, 127};
    y = run1("Abs", T(CGE_I8, CGE_SHAPE(3), b));
    const int8_t b_abs[3] = {-128, 1, 127};
    op_assert_equal(&y, CGE_I8, CGE_SHAPE(3), b_abs);
    op_free_outputs(&y, 1);
    const int64_t l[2] = {-3, INT64_MAX};
    y = run1("Neg", T(CGE_I64, CGE_SHAPE(2), l));
    const int64_t l_neg[2] = {3, -INT64_MAX};
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(2), l_neg);
    op_free_outputs(&y, 1);
    y = run1("Relu", T(CGE_I64, CGE_SHAPE(2), l));
    const int64_t l_relu[2] = {0, INT64_MAX};
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(2), l_relu);
    op_free_outputs(&y, 1);
    const uint16_t u[3] = {0, 1, 65535};
    y = run1("Abs", T(CGE_U16, CGE_SHAPE(3), u));
    op_assert_equal(&y, CGE_U16, CGE_SHAPE(3), u);
    op_free_outputs(&y, 1);
}

/* Several blocks; rank 0; empty. */
static void test_shapes(void **state)
{
    enum { N = 100003 };
    float *x = malloc(sizeof(float) * N);
    int32_t *ix = malloc(sizeof(int32_t) * N);
    assert_non_null(x);
    assert_non_null(ix);
    for (int i = 0; i < N; i++) {
        x[i] = (float)i * 0.37f;
        ix[i] = (i % 7) - 3;
    }
    cge_tensor y = run1("Sqrt", T(CGE_F32, CGE_SHAPE(N), x));
    const float *o = y.data;
    for (int i = 0; i < N; i++)
        if (o[i] != sqrtf(x[i]))
            fail_msg("Sqrt element %d: %g", i, o[i]);
    op_free_outputs(&y, 1);
    y = run1("Relu", T(CGE_I32, CGE_SHAPE(N), ix));
    const int32_t *io = y.data;
    for (int i = 0; i < N; i++)
        if (io[i] != (ix[i] < 0 ? 0 : ix[i]))
            fail_msg("Relu element %d: %d", i, io[i]);
    op_free_outputs(&y, 1);
    y = cast(T(CGE_I32, CGE_SHAPE(N), ix), CGE_F64);
    const double *d = y.data;
    for (int i = 0; i < N; i++)
        if (d[i] != (double)ix[i])
            fail_msg("Cast element %d: %g", i, d[i]);
    op_free_outputs(&y, 1);
    free(x);
    free(ix);

    const double s = 1.0;
    y = run1("Exp", T(CGE_F64, CGE_SCALAR, &s));
    const double e = exp(1.0);
    op_assert_close(&y, CGE_F64, CGE_SCALAR, &e, 1e-15, 0);
    op_free_outputs(&y, 1);
    y = run1("Tanh", T(CGE_F32, CGE_SHAPE(0, 5), NULL));
    op_assert_shape(&y, CGE_SHAPE(0, 5));
    op_free_outputs(&y, 1);
    y = cast(T(CGE_F32, CGE_SHAPE(3, 0), NULL), CGE_I8);
    op_assert_shape(&y, CGE_SHAPE(3, 0));
    assert_int_equal(y.dtype, CGE_I8);
    op_free_outputs(&y, 1);
}

/* ---- Cast ------------------------------------------------------------------------ */

static void test_cast_float_to_int(void **state)
{
    const float f[7] = {-2.7f, 2.7f, NAN, 1e10f, -1e10f, -0.5f, INFINITY};
    cge_tensor t = T(CGE_F32, CGE_SHAPE(7), f);
    cge_tensor y = cast(t, CGE_I32);
    const int32_t w32[7] = {-2, 2, 0, INT32_MAX, INT32_MIN, 0, INT32_MAX};
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(7), w32);
    op_free_outputs(&y, 1);
    y = cast(t, CGE_U8);
    const uint8_t wu8[7] = {0, 2, 0, 255, 0, 0, 255};
    op_assert_equal(&y, CGE_U8, CGE_SHAPE(7), wu8);
    op_free_outputs(&y, 1);
    y = cast(t, CGE_I64);
    const int64_t w64[7] = {-2, 2, 0, 10000000000LL, -10000000000LL, 0, INT64_MAX};
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(7), w64);
    op_free_outputs(&y, 1);
    const double d[4] = {9.3e18, -9.3e18, 1.9e19, -1.0};
    y = cast(T(CGE_F64, CGE_SHAPE(4), d), CGE_I64);
    const int64_t wd[4] = {INT64_MAX, INT64_MIN, INT64_MAX, -1};
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(4), wd);
    op_free_outputs(&y, 1);
    y = cast(T(CGE_F64, CGE_SHAPE(4), d), CGE_U64);
    const uint64_t wu[4] = {9300000000000000000ULL, 0, UINT64_MAX, 0};
    op_assert_equal(&y, CGE_U64, CGE_SHAPE(4), wu);
    op_free_outputs(&y, 1);
    uint16_t h[2] = {cge_f32_to_f16(2.5f), cge_f32_to_f16(-3.75f)};
    y = cast(T(CGE_F16, CGE_SHAPE(2), h), CGE_I16);
    const int16_t wh[2] = {2, -3};
    op_assert_equal(&y, CGE_I16, CGE_SHAPE(2), wh);
    op_free_outputs(&y, 1);
}

static void test_cast_int_to_int(void **state)
{
    const int64_t l[4] = {300, -129, 127, -1};
    cge_tensor y = cast(T(CGE_I64, CGE_SHAPE(4), l), CGE_I8);
    const int8_t w8[4] = {44, 127, 127, -1};
    op_assert_equal(&y, CGE_I8, CGE_SHAPE(4), w8);
    op_free_outputs(&y, 1);
    y = cast(T(CGE_I64, CGE_SHAPE(4), l), CGE_U16);
    const uint16_t w16[4] = {300, 65407, 127, 65535};
    op_assert_equal(&y, CGE_U16, CGE_SHAPE(4), w16);
    op_free_outputs(&y, 1);
    const uint64_t u[2] = {UINT64_MAX, 5};
    y = cast(T(CGE_U64, CGE_SHAPE(2), u), CGE_I64);
    const int64_t wl[2] = {-1, 5};
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(2), wl);
    op_free_outputs(&y, 1);
    const int32_t i[3] = {-1, 256, 2};
    y = cast(T(CGE_I32, CGE_SHAPE(3), i), CGE_U8);
    const uint8_t wu[3] = {255, 0, 2};
    op_assert_equal(&y, CGE_U8, CGE_SHAPE(3), wu);
    op_free_outputs(&y, 1);
    y = cast(T(CGE_I32, CGE_SHAPE(3), i), CGE_BOOL);
    const uint8_t wb[3] = {1, 1, 1};
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(3), wb);
    op_free_outputs(&y, 1);
}

static void test_cast_to_float(void **state)
{
    const int64_t big[2] = {(1LL << 53) + 1, -3};
    cge_tensor y = cast(T(CGE_I64, CGE_SHAPE(2), big), CGE_F64);
    const double wd[2] = {9007199254740992.0, -3.0};
    op_assert_equal(&y, CGE_F64, CGE_SHAPE(2), wd);
    op_free_outputs(&y, 1);
    const uint32_t u = UINT32_MAX;
    y = cast(T(CGE_U32, CGE_SCALAR, &u), CGE_F32);
    const float wf = 4294967296.0f;
    op_assert_equal(&y, CGE_F32, CGE_SCALAR, &wf);
    op_free_outputs(&y, 1);
    const uint8_t b[3] = {0, 1, 1};
    y = cast(T(CGE_BOOL, CGE_SHAPE(3), b), CGE_F32);
    const float wb[3] = {0, 1, 1};
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3), wb);
    op_free_outputs(&y, 1);
    y = cast(T(CGE_BOOL, CGE_SHAPE(3), b), CGE_I64);
    const int64_t wbl[3] = {0, 1, 1};
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(3), wbl);
    op_free_outputs(&y, 1);
    const double d[2] = {1e300, 0.1};
    y = cast(T(CGE_F64, CGE_SHAPE(2), d), CGE_F32);
    const float wdf[2] = {INFINITY, 0.1f};
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2), wdf);
    op_free_outputs(&y, 1);

    /* float32 -> float16 against numpy (round to nearest even, overflow to
     * inf, underflow to 0, -0 kept), and back exactly. */
    y = cast(T(CGE_F32, CGE_SHAPE(8), un_cast_f32), CGE_F16);
    op_assert_equal(&y, CGE_F16, CGE_SHAPE(8), un_cast_f16);
    cge_tensor back = cast(y, CGE_F32);
    const float *bo = back.data;
    for (int i = 0; i < 8; i++)
        assert_true(bo[i] == cge_f16_to_f32(un_cast_f16[i]));
    op_free_outputs(&back, 1);
    op_free_outputs(&y, 1);
    /* float32 -> bfloat16 -> float64. */
    const float bf[3] = {1.00390625f, 1.01171875f, -3.0f};
    y = cast(T(CGE_F32, CGE_SHAPE(3), bf), CGE_BF16);
    const uint16_t wbf[3] = {cge_f32_to_bf16(bf[0]), cge_f32_to_bf16(bf[1]),
                             cge_f32_to_bf16(bf[2])};
    op_assert_equal(&y, CGE_BF16, CGE_SHAPE(3), wbf);
    assert_true(cge_bf16_to_f32(wbf[0]) == 1.0f); /* tie to even */
    back = cast(y, CGE_F64);
    const double wback[3] = {1.0, 1.015625, -3.0};
    op_assert_equal(&back, CGE_F64, CGE_SHAPE(3), wback);
    op_free_outputs(&back, 1);
    op_free_outputs(&y, 1);
    /* int64 -> float16. */
    const int64_t li[2] = {1000, -70000};
    y = cast(T(CGE_I64, CGE_SHAPE(2), li), CGE_F16);
    const uint16_t *ho = y.data;
    assert_true(cge_f16_to_f32(ho[0]) == 1000.0f);
    assert_true(isinf(cge_f16_to_f32(ho[1])) && cge_f16_to_f32(ho[1]) < 0);
    op_free_outputs(&y, 1);
}

static void test_cast_to_bool_and_same(void **state)
{
    const float f[4] = {0.0f, -0.0f, NAN, 0.1f};
    cge_tensor y = cast(T(CGE_F32, CGE_SHAPE(4), f), CGE_BOOL);
    const uint8_t w[4] = {0, 0, 1, 1};
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(4), w);
    op_free_outputs(&y, 1);
    uint16_t h[2] = {cge_f32_to_f16(0.0f), cge_f32_to_f16(-2.0f)};
    y = cast(T(CGE_F16, CGE_SHAPE(2), h), CGE_BOOL);
    const uint8_t wh[2] = {0, 1};
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(2), wh);
    op_free_outputs(&y, 1);
    /* Same dtype: bytes unchanged, NaN payloads included. */
    y = cast(T(CGE_F32, CGE_SHAPE(4), f), CGE_F32);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(4), f);
    op_free_outputs(&y, 1);
}

/* ---- Identity, meta -------------------------------------------------------------- */

static void test_identity(void **state)
{
    const int16_t s[5] = {1, -2, 3, -4, 5};
    cge_tensor y = run1("Identity", T(CGE_I16, CGE_SHAPE(5, 1), s));
    op_assert_equal(&y, CGE_I16, CGE_SHAPE(5, 1), s);
    op_free_outputs(&y, 1);
    const uint8_t b = 1;
    y = run1("Identity", T(CGE_BOOL, CGE_SCALAR, &b));
    op_assert_equal(&y, CGE_BOOL, CGE_SCALAR, &b);
    op_free_outputs(&y, 1);
    y = run1("Identity", T(CGE_U64, CGE_SHAPE(0), NULL));
    op_assert_shape(&y, CGE_SHAPE(0));
    op_free_outputs(&y, 1);
}

static cge_status infer1(const char *op, cge_dtype dt, cge_shape s, const cge_attr *attrs,
                         int32_t nattrs, cge_tensor_desc *out)
{
    cge_tensor_desc in = {.name = "x", .dtype = dt, .shape = s};
    return op_infer(op, &in, NULL, 1, attrs, nattrs, out, 1);
}

static void test_meta(void **state)
{
    cge_tensor_desc out[1];
    /* Dynamic dims pass through; Cast takes its dtype from 'to'. */
    cge_attr to = {.name = "to", .kind = CGE_ATTR_INT, .i = CGE_F16};
    assert_int_equal(infer1("Cast", CGE_I64, CGE_SHAPE(CGE_DIM_DYNAMIC, 3), &to, 1, out), CGE_OK);
    assert_int_equal(out[0].dtype, CGE_F16);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(CGE_DIM_DYNAMIC, 3)));
    assert_int_equal(infer1("Sigmoid", CGE_BF16, CGE_SCALAR, NULL, 0, out), CGE_OK);
    assert_int_equal(out[0].dtype, CGE_BF16);
    assert_int_equal(out[0].shape.rank, 0);

    op_assert_error(infer1("Exp", CGE_I32, CGE_SHAPE(2), NULL, 0, out), "[meta]", "node0");
    op_assert_error(infer1("Neg", CGE_U8, CGE_SHAPE(2), NULL, 0, out), "[meta]", "node0");
    op_assert_error(infer1("Relu", CGE_U32, CGE_SHAPE(2), NULL, 0, out), "[meta]", "node0");
    op_assert_error(infer1("Abs", CGE_BOOL, CGE_SHAPE(2), NULL, 0, out), "[meta]", "node0");
    op_assert_error(infer1("Log", CGE_I64, CGE_SHAPE(2), NULL, 0, out), "[meta]", "node0");
    op_assert_error(infer1("LeakyRelu", CGE_I8, CGE_SHAPE(2), NULL, 0, out), "[meta]", "node0");
    cge_attr bad_to = {.name = "to", .kind = CGE_ATTR_INT, .i = 14}; /* ONNX complex64 */
    op_assert_error(infer1("Cast", CGE_F32, CGE_SHAPE(2), &bad_to, 1, out), "[meta]",
                    "'to' = 14");
    bad_to.i = 99;
    op_assert_error(infer1("Cast", CGE_F32, CGE_SHAPE(2), &bad_to, 1, out), "[meta]", "node0");
    cge_attr ap = {.name = "approximate", .kind = CGE_ATTR_STRING, .s = "fast"};
    op_assert_error(infer1("Gelu", CGE_F32, CGE_SHAPE(2), &ap, 1, out), "[meta]",
                    "approximate is 'fast'");
    op_assert_error(infer1("Gelu", CGE_F32, CGE_SHAPE(2), &ap, 1, out), "[meta]", "node0");
}

/* Elementwise same-dtype kernels declare in-place pairing with input 0;
 * Cast (element size may change) never does. */
static void test_inplace_declarations(void **state)
{
    const char *inplace[] = {"Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Relu",
                             "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Gelu", "Identity"};
    for (size_t i = 0; i < sizeof inplace / sizeof inplace[0]; i++) {
        const cge_op_def *d = cge_op_find("", inplace[i], 0);
        assert_non_null(d);
        assert_int_equal(d->kernels[0].inplace_input, 0);
    }
    assert_int_equal(cge_op_find("", "Cast", 0)->kernels[0].inplace_input, -1);
}

/* Sigmoid written over its own input, over several blocks. */
static void test_sigmoid_in_place(void **state)
{
    enum { N = 70001 };
    cge_device *dev = NULL;
    cge_stream *stream = NULL;
    assert_int_equal(cge_device_create_cpu(NULL, &dev), CGE_OK);
    assert_int_equal(cge_stream_create(dev, &stream), CGE_OK);
    void *p = NULL;
    assert_int_equal(cge_mem_alloc(dev, sizeof(float) * N, &p), CGE_OK);
    float *x = p;
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 41) - 20.0f;
    const cge_op_def *def = cge_op_find("", "Sigmoid", 0);
    cge_tensor t = T(CGE_F32, CGE_SHAPE(N), x), o = T(CGE_F32, CGE_SHAPE(N), x);
    cge_kernel_ctx ctx = {.op_type = "Sigmoid", .node_name = "sig0", .num_inputs = 1,
                          .inputs = &t, .num_outputs = 1, .outputs = &o, .device = dev,
                          .num_threads = cge_device_num_threads(dev)};
    assert_int_equal(def->kernels[0].launch(&ctx, stream), CGE_OK);
    assert_int_equal(cge_stream_synchronize(stream), CGE_OK);
    for (int i = 0; i < N; i++) {
        double v = (double)(i % 41) - 20.0, want = 1.0 / (1.0 + exp(-v));
        if (fabs(x[i] - want) > 1e-6 * want)
            fail_msg("element %d: %g, expected %g", i, x[i], want);
    }
    /* A launch whose output shape differs from the input's is refused. */
    o.shape = CGE_SHAPE(N - 1);
    op_assert_error(def->kernels[0].launch(&ctx, stream), "[kernel]", "sig0");
    cge_mem_free(dev, p);
    cge_stream_destroy(stream);
    cge_device_destroy(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_ops_vs_numpy),
        cmocka_unit_test(test_leaky_default_alpha),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_half_types),
        cmocka_unit_test(test_int_ops),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_cast_float_to_int),
        cmocka_unit_test(test_cast_int_to_int),
        cmocka_unit_test(test_cast_to_float),
        cmocka_unit_test(test_cast_to_bool_and_same),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_inplace_declarations),
        cmocka_unit_test(test_sigmoid_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
