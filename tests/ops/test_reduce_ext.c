/* Tests of ReduceMin/Prod/L1/L2/LogSum/LogSumExp/SumSquare (opsets 13 and 18)
 * and ArgMax/ArgMin: every ONNX 1.12 node test case (reduce_ext_fixtures.h),
 * large shapes against naive loops for each plan kind, integer and half
 * dtypes, empty reductions, noop_with_empty_axes, NaN picks and meta errors. */
#include "onnx_node_case.h"
#include "op_runner.h"
#include "reduce_ext_fixtures.h"

static cge_device *g_dev;
static cge_stream *g_stream;

static int setup(void **state)
{
    if (cge_device_create_cpu(NULL, &g_dev) != CGE_OK)
        return -1;
    return cge_stream_create(g_dev, &g_stream) == CGE_OK ? 0 : -1;
}

static int teardown(void **state)
{
    cge_stream_destroy(g_stream);
    cge_device_destroy(g_dev);
    return 0;
}

static fx_tensor fxt(cge_dtype dt, cge_shape s, const void *data)
{
    fx_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = s.rank;
    for (int i = 0; i < s.rank; i++)
        t.dims[i] = s.dims[i];
    t.data = data;
    return t;
}

static fx_attr fxa_i(const char *name, int64_t v)
{
    return (fx_attr){.name = name, .kind = CGE_ATTR_INT, .i = v};
}

static fx_attr fxa_ints(const char *name, const int64_t *v, int64_t n)
{
    return (fx_attr){.name = name, .kind = CGE_ATTR_INTS, .n = n, .ints = v};
}

static void test_onnx_cases(void **state)
{
    size_t n = sizeof reduce_ext_cases / sizeof reduce_ext_cases[0];
    assert_true(n >= 130);
    for (size_t i = 0; i < n; i++)
        fx_run_case(&reduce_ext_cases[i], g_dev, g_stream, 1e-5, 1e-6);
}

/* ---- large shapes against naive loops ------------------------------------------------ */

enum { OP_MIN, OP_PROD, OP_L1, OP_L2, OP_LOGSUM, OP_LSE, OP_SUMSQ };
static const char *const op_names[] = {"ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                                       "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};

/* Reference for a rank-3 input [a,b,c] reduced over `mask` (keepdims=1). */
static void naive(int op, const float *x, const int64_t *dims, const bool *mask, float *y)
{
    int64_t od[3];
    for (int d = 0; d < 3; d++)
        od[d] = mask[d] ? 1 : dims[d];
    for (int64_t i = 0; i < od[0]; i++)
        for (int64_t j = 0; j < od[1]; j++)
            for (int64_t k = 0; k < od[2]; k++) {
                double acc = op == OP_MIN ? INFINITY : op == OP_PROD ? 1.0 : 0.0, mx = -INFINITY;
                for (int pass = 0; pass < (op == OP_LSE ? 2 : 1); pass++)
                    for (int64_t a = 0; a < (mask[0] ? dims[0] : 1); a++)
                        for (int64_t b = 0; b < (mask[1] ? dims[1] : 1); b++)
                            for (int64_t c = 0; c < (mask[2] ? dims[2] : 1); c++) {
                                int64_t ii = mask[0] ? a : i, jj = mask[1] ? b : j,
                                        kk = mask[2] ? c : k;
                                double v = x[(ii * dims[1] + jj) * dims[2] + kk];
                                switch (op) {
                                case OP_MIN: acc = v < acc ? v : acc; break;
                                case OP_PROD: acc *= v; break;
                                case OP_L1: acc += fabs(v); break;
                                case OP_L2:
                                case OP_SUMSQ: acc += v * v; break;
                                case OP_LOGSUM: acc += v; break;
                                default:
                                    if (pass == 0)
                                        mx = v > mx ? v : mx;
                                    else
                                        acc += exp(v - mx);
                                }
                            }
                double r = op == OP_L2 ? sqrt(acc) : op == OP_LOGSUM ? log(acc)
                         : op == OP_LSE ? mx + log(acc) : acc;
                y[(i * od[1] + j) * od[2] + k] = (float)r;
            }
}

static void test_large_plans(void **state)
{
    int64_t dims[3] = {37, 129, 41};
    int64_t n = dims[0] * dims[1] * dims[2];
    float *x = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(((i * 7919) % 1000) / 500.0 + 0.05); /* positive: LogSum is finite */
    /* rows (last axis), middle, first, strided (0 and 2), all */
    static const bool masks[][3] = {{0, 0, 1}, {0, 1, 0}, {1, 0, 0}, {1, 0, 1}, {1, 1, 1}};
    static const int ops[] = {OP_MIN, OP_L1, OP_L2, OP_LOGSUM, OP_LSE, OP_SUMSQ};
    for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            int64_t axes[3], na = 0;
            for (int d = 0; d < 3; d++)
                if (masks[m][d])
                    axes[na++] = d;
            naive(ops[o], x, dims, masks[m], want);
            cge_shape os = CGE_SHAPE(masks[m][0] ? 1 : dims[0], masks[m][1] ? 1 : dims[1],
                                     masks[m][2] ? 1 : dims[2]);
            /* opset 13 (attribute) and 18 (input) */
            fx_case c13 = {.name = "large13", .op = op_names[ops[o]], .opset = 13, .nin = 1,
                           .in = {fxt(CGE_F32, CGE_SHAPE(dims[0], dims[1], dims[2]), x)},
                           .nout = 1, .out = {fxt(CGE_F32, os, want)}, .nattr = 1,
                           .attrs = {fxa_ints("axes", axes, na)}};
            fx_run_case(&c13, g_dev, g_stream, 2e-5, 1e-5);
            fx_case c18 = c13;
            c18.name = "large18";
            c18.opset = 18;
            c18.nin = 2;
            c18.in[1] = fxt(CGE_I64, CGE_SHAPE(na), axes);
            c18.nattr = 0;
            fx_run_case(&c18, g_dev, g_stream, 2e-5, 1e-5);
        }
    free(x);
    free(want);
}

/* ---- dtypes -------------------------------------------------------------------------- */

static void test_int_dtypes(void **state)
{
    int32_t x[6] = {3, -4, 100000, 70000, -2, 5};
    int64_t ax1[1] = {1};
    /* product of [3,-4,100000] = -1200000; [70000,-2,5] = -700000 */
    int32_t prod[2] = {-1200000, -700000}, mn[2] = {-4, -2}, l1[2] = {100007, 70007};
    /* sum of squares wraps at 32 bits, as the output type does */
    int64_t sq0 = 9 + 16 + 10000000000LL, sq1 = 4900000000LL + 4 + 25;
    int32_t sq[2] = {(int32_t)(uint32_t)(uint64_t)sq0, (int32_t)(uint32_t)(uint64_t)sq1};
    int32_t l2[2] = {(int32_t)sqrt((double)sq0), (int32_t)sqrt((double)sq1)};
    struct { const char *op; const int32_t *want; } cases[] = {
        {"ReduceProd", prod}, {"ReduceMin", mn}, {"ReduceL1", l1}, {"ReduceSumSquare", sq},
        {"ReduceL2", l2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fx_case c = {.name = cases[i].op, .op = cases[i].op, .opset = 13, .nin = 1,
                     .in = {fxt(CGE_I32, CGE_SHAPE(2, 3), x)}, .nout = 1,
                     .out = {fxt(CGE_I32, CGE_SHAPE(2), cases[i].want)}, .nattr = 2,
                     .attrs = {fxa_ints("axes", ax1, 1), fxa_i("keepdims", 0)}};
        fx_run_case(&c, g_dev, g_stream, 0, 0);
    }
    /* uint8 min (only ReduceMin takes 8-bit types) and int64 extremes */
    uint8_t u[4] = {200, 7, 255, 9}, umin[1] = {7};
    fx_case cu = {.name = "u8min", .op = "ReduceMin", .opset = 18, .nin = 1,
                  .in = {fxt(CGE_U8, CGE_SHAPE(4), u)}, .nout = 1,
                  .out = {fxt(CGE_U8, CGE_SHAPE(1), umin)}};
    fx_run_case(&cu, g_dev, g_stream, 0, 0);
    int64_t big[3] = {INT64_MAX, INT64_MIN, 5}, bmin[1] = {INT64_MIN};
    fx_case cb = {.name = "i64min", .op = "ReduceMin", .opset = 18, .nin = 1,
                  .in = {fxt(CGE_I64, CGE_SHAPE(3), big)}, .nout = 1,
                  .out = {fxt(CGE_I64, CGE_SHAPE(1), bmin)}};
    fx_run_case(&cb, g_dev, g_stream, 0, 0);
    /* |INT64_MIN| wraps instead of overflowing (sanitizer-clean) */
    int64_t l1min[1] = {INT64_MIN + 5};
    fx_case cl = {.name = "i64l1", .op = "ReduceL1", .opset = 18, .nin = 1,
                  .in = {fxt(CGE_I64, CGE_SHAPE(2), big + 1)}, .nout = 1,
                  .out = {fxt(CGE_I64, CGE_SHAPE(1), l1min)}};
    fx_run_case(&cl, g_dev, g_stream, 0, 0);
}

static void test_half_dtypes(void **state)
{
    float xf[8] = {-1.5f, 2.0f, 0.25f, -3.0f, 4.0f, 0.5f, -0.5f, 1.0f};
    uint16_t xh[8], xb[8], l1h[2], l1b[2], lseh[2];
    for (int i = 0; i < 8; i++) {
        xh[i] = cge_f32_to_f16(xf[i]);
        xb[i] = cge_f32_to_bf16(xf[i]);
    }
    for (int r = 0; r < 2; r++) {
        double s = 0, m = -INFINITY, e = 0;
        for (int j = 0; j < 4; j++) {
            s += fabs(xf[r * 4 + j]);
            m = xf[r * 4 + j] > m ? xf[r * 4 + j] : m;
        }
        for (int j = 0; j < 4; j++)
            e += exp(xf[r * 4 + j] - m);
        l1h[r] = cge_f32_to_f16((float)s);
        l1b[r] = cge_f32_to_bf16((float)s);
        lseh[r] = cge_f32_to_f16((float)(m + log(e)));
    }
    fx_case c = {.name = "f16l1", .op = "ReduceL1", .opset = 18, .nin = 2,
                 .in = {fxt(CGE_F16, CGE_SHAPE(2, 4), xh),
                        fxt(CGE_I64, CGE_SHAPE(1), &(int64_t){-1})},
                 .nout = 1, .out = {fxt(CGE_F16, CGE_SHAPE(2, 1), l1h)}};
    fx_run_case(&c, g_dev, g_stream, 0, 0);
    c.in[0] = fxt(CGE_BF16, CGE_SHAPE(2, 4), xb);
    c.out[0] = fxt(CGE_BF16, CGE_SHAPE(2, 1), l1b);
    fx_run_case(&c, g_dev, g_stream, 0, 0);
    c.op = "ReduceLogSumExp";
    c.in[0] = fxt(CGE_F16, CGE_SHAPE(2, 4), xh);
    c.out[0] = fxt(CGE_F16, CGE_SHAPE(2, 1), lseh);
    fx_run_case(&c, g_dev, g_stream, 0, 0);
}

/* ---- identities, noop, special values ------------------------------------------------ */

static void test_empty_and_noop(void **state)
{
    float dummy[1] = {0};
    float inf1[3] = {INFINITY, INFINITY, INFINITY}, one[3] = {1, 1, 1}, zero[3] = {0, 0, 0},
          ninf[3] = {-INFINITY, -INFINITY, -INFINITY};
    int64_t ax[1] = {1};
    struct { const char *op; const float *want; } cases[] = {
        {"ReduceMin", inf1}, {"ReduceProd", one}, {"ReduceL1", zero}, {"ReduceL2", zero},
        {"ReduceSumSquare", zero}, {"ReduceLogSum", ninf}, {"ReduceLogSumExp", ninf}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fx_case c = {.name = cases[i].op, .op = cases[i].op, .opset = 18, .nin = 2,
                     .in = {fxt(CGE_F32, CGE_SHAPE(3, 0), dummy), fxt(CGE_I64, CGE_SHAPE(1), ax)},
                     .nout = 1, .out = {fxt(CGE_F32, CGE_SHAPE(3, 1), cases[i].want)}};
        fx_run_case(&c, g_dev, g_stream, 0, 0);
    }
    int32_t imax[2] = {INT32_MAX, INT32_MAX};
    fx_case ci = {.name = "i32min_empty", .op = "ReduceMin", .opset = 13, .nin = 1,
                  .in = {fxt(CGE_I32, CGE_SHAPE(2, 0), dummy)}, .nout = 1,
                  .out = {fxt(CGE_I32, CGE_SHAPE(2, 1), imax)}, .nattr = 1,
                  .attrs = {fxa_ints("axes", ax, 1)}};
    fx_run_case(&ci, g_dev, g_stream, 0, 0);
    /* noop_with_empty_axes: the input unchanged (not |x|), absent or empty axes */
    float x[4] = {-1, 2, -3, 4};
    fx_case cn = {.name = "noop", .op = "ReduceL1", .opset = 18, .nin = 1,
                  .in = {fxt(CGE_F32, CGE_SHAPE(2, 2), x)}, .nout = 1,
                  .out = {fxt(CGE_F32, CGE_SHAPE(2, 2), x)}, .nattr = 1,
                  .attrs = {fxa_i("noop_with_empty_axes", 1)}};
    fx_run_case(&cn, g_dev, g_stream, 0, 0);
    cn.nin = 2;
    cn.in[1] = fxt(CGE_I64, CGE_SHAPE(0), ax);
    fx_run_case(&cn, g_dev, g_stream, 0, 0);
    /* without noop, empty axes reduce everything */
    float all[1] = {10};
    cn.nattr = 0;
    cn.out[0] = fxt(CGE_F32, CGE_SHAPE(1, 1), all);
    fx_run_case(&cn, g_dev, g_stream, 0, 0);
    /* reducing a size-1 axis still applies the op */
    float ab[4] = {1, 2, 3, 4};
    int64_t ax0[1] = {0};
    fx_case c1 = {.name = "size1", .op = "ReduceL1", .opset = 13, .nin = 1,
                  .in = {fxt(CGE_F32, CGE_SHAPE(1, 4), x)}, .nout = 1,
                  .out = {fxt(CGE_F32, CGE_SHAPE(4), ab)}, .nattr = 2,
                  .attrs = {fxa_ints("axes", ax0, 1), fxa_i("keepdims", 0)}};
    fx_run_case(&c1, g_dev, g_stream, 0, 0);
}

static void test_nan_inf(void **state)
{
    float x[6] = {1, NAN, 3, INFINITY, 2, 1};
    float mn[2] = {NAN, 1}, lse[2] = {NAN, INFINITY};
    int64_t ax[1] = {1};
    fx_case c = {.name = "nanmin", .op = "ReduceMin", .opset = 13, .nin = 1,
                 .in = {fxt(CGE_F32, CGE_SHAPE(2, 3), x)}, .nout = 1,
                 .out = {fxt(CGE_F32, CGE_SHAPE(2), mn)}, .nattr = 2,
                 .attrs = {fxa_ints("axes", ax, 1), fxa_i("keepdims", 0)}};
    fx_run_case(&c, g_dev, g_stream, 0, 0);
    c.op = "ReduceLogSumExp";
    c.out[0] = fxt(CGE_F32, CGE_SHAPE(2), lse);
    fx_run_case(&c, g_dev, g_stream, 0, 0);
}

static void test_arg_dtypes_and_nan(void **state)
{
    float x[8] = {1, NAN, 3, NAN, 5, 5, 2, 5};
    int64_t mxf[2] = {1, 0}, mxl[2] = {3, 3};
    fx_case c = {.name = "argmax_nan", .op = "ArgMax", .opset = 13, .nin = 1,
                 .in = {fxt(CGE_F32, CGE_SHAPE(2, 4), x)}, .nout = 1,
                 .out = {fxt(CGE_I64, CGE_SHAPE(2), mxf)}, .nattr = 2,
                 .attrs = {fxa_i("axis", 1), fxa_i("keepdims", 0)}};
    fx_run_case(&c, g_dev, g_stream, 0, 0);
    c.nattr = 3;
    c.attrs[2] = fxa_i("select_last_index", 1);
    c.out[0] = fxt(CGE_I64, CGE_SHAPE(2), mxl);
    fx_run_case(&c, g_dev, g_stream, 0, 0);
    /* row 1 = {5,5,2,5}: max first 0 / last 3; min is 2 at index 2 */
    int64_t minf[2] = {1, 2};
    c.op = "ArgMin";
    c.nattr = 2;
    c.out[0] = fxt(CGE_I64, CGE_SHAPE(2), minf);
    fx_run_case(&c, g_dev, g_stream, 0, 0);
    /* int64 beyond double precision, u8, f16 along axis 0 with inner > chunk */
    int64_t big[4] = {INT64_MAX - 1, INT64_MAX, INT64_MAX, 0}, bi[1] = {1};
    fx_case cb = {.name = "argmax_i64", .op = "ArgMax", .opset = 13, .nin = 1,
                  .in = {fxt(CGE_I64, CGE_SHAPE(4), big)}, .nout = 1,
                  .out = {fxt(CGE_I64, CGE_SHAPE(1), bi)}};
    fx_run_case(&cb, g_dev, g_stream, 0, 0);
    enum { R = 5, C = 300 };
    uint16_t *h = malloc(sizeof(uint16_t) * R * C);
    int64_t *want = malloc(sizeof(int64_t) * C);
    for (int j = 0; j < C; j++) {
        int best = 0;
        for (int i = 0; i < R; i++) {
            float v = (float)((i * 37 + j * 11) % 17);
            h[i * C + j] = cge_f32_to_f16(v);
            if (v < cge_f16_to_f32(h[best * C + j]))
                best = i;
        }
        want[j] = best;
    }
    fx_case ch = {.name = "argmin_f16", .op = "ArgMin", .opset = 13, .nin = 1,
                  .in = {fxt(CGE_F16, CGE_SHAPE(R, C), h)}, .nout = 1,
                  .out = {fxt(CGE_I64, CGE_SHAPE(1, C), want)}};
    fx_run_case(&ch, g_dev, g_stream, 0, 0);
    free(h);
    free(want);
}

static void test_meta(void **state)
{
    cge_tensor_desc in[2] = {{.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 3, 1)},
                             {.name = "", .dtype = CGE_I64, .shape = CGE_SHAPE(1)}};
    cge_tensor_desc out[1] = {{.name = ""}};
    /* unknown axes, keepdims: dims become dynamic except size-1 ones */
    assert_int_equal(op_infer("ReduceL2", in, NULL, 2, NULL, 0, out, 1), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape},
                    CGE_SHAPE(CGE_DIM_DYNAMIC, CGE_DIM_DYNAMIC, 1));
    cge_attr kd0 = CGE_ATTR_I("keepdims", 0);
    /* keepdims=0: one axis goes, which one is not known yet */
    assert_int_equal(op_infer("ReduceProd", in, NULL, 2, &kd0, 1, out, 1), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape},
                    CGE_SHAPE(CGE_DIM_DYNAMIC, CGE_DIM_DYNAMIC));
    int64_t bad[1] = {3};
    const void *vals[2] = {NULL, bad};
    op_assert_error(op_infer("ReduceMin", in, vals, 2, NULL, 0, out, 1), "[meta]",
                    "out of range");
    cge_attr ax5 = CGE_ATTR_I("axis", 5);
    op_assert_error(op_infer("ArgMax", in, NULL, 1, &ax5, 1, out, 1), "[meta]", "out of range");
    cge_tensor_desc empty = {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(0, 3)};
    op_assert_error(op_infer("ArgMin", &empty, NULL, 1, NULL, 0, out, 1), "[meta]", "empty");
    /* 8-bit types only for ReduceMin */
    cge_tensor_desc u8 = {.name = "", .dtype = CGE_U8, .shape = CGE_SHAPE(4)};
    assert_int_equal(op_infer("ReduceMin", &u8, NULL, 1, NULL, 0, out, 1), CGE_OK);
    assert_int_not_equal(op_infer("ReduceProd", &u8, NULL, 1, NULL, 0, out, 1), CGE_OK);
    cge_attr nk = CGE_ATTR_I("keepdims", 0);
    assert_int_equal(op_infer("ArgMax", in, NULL, 1, &nk, 1, out, 1), CGE_OK);
    assert_int_equal(out[0].dtype, CGE_I64);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape}, CGE_SHAPE(3, 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onnx_cases),
        cmocka_unit_test(test_large_plans),
        cmocka_unit_test(test_int_dtypes),
        cmocka_unit_test(test_half_dtypes),
        cmocka_unit_test(test_empty_and_noop),
        cmocka_unit_test(test_nan_inf),
        cmocka_unit_test(test_arg_dtypes_and_nan),
        cmocka_unit_test(test_meta),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
