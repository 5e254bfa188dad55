/* Tests of Range, ConstantOfShape, EyeLike, Tile, Size, DepthToSpace,
 * SpaceToDepth and ReverseSequence: every ONNX 1.12 node test case
 * (generate_fixtures.h), then large shapes against naive loops, round trips,
 * clamped lengths and offsets, dtypes, and meta without values. */
#include <math.h>

#include "generate_fixtures.h"
#include "onnx_node_case.h"
#include "op_runner.h"

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

static void test_onnx_cases(void **state)
{
    size_t n = sizeof generate_cases / sizeof generate_cases[0];
    assert_true(n >= 18);
    for (size_t i = 0; i < n; i++)
        fx_run_case(&generate_cases[i], g_dev, g_stream, 1e-6, 1e-7);
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

static void run(const char *op, int opset, int nin, const fx_tensor *in, const fx_tensor *out,
                int nattr, const fx_attr *attrs)
{
    fx_case c;
    memset(&c, 0, sizeof c);
    c.name = op;
    c.op = op;
    c.opset = opset;
    c.nin = nin;
    c.nout = 1;
    c.nattr = nattr;
    for (int i = 0; i < nin; i++)
        c.in[i] = in[i];
    c.out[0] = *out;
    for (int i = 0; i < nattr; i++)
        c.attrs[i] = attrs[i];
    fx_run_case(&c, g_dev, g_stream, 1e-6, 1e-6);
}

static void test_range_large_and_ints(void **state)
{
    enum { N = 70000 };
    double s = -3.5, l = 3.5, d = 1e-4;
    double *want = malloc(sizeof(double) * N);
    for (int i = 0; i < N; i++)
        want[i] = s + i * d;
    fx_tensor in[3] = {fxt(CGE_F64, CGE_SCALAR, &s), fxt(CGE_F64, CGE_SCALAR, &l),
                       fxt(CGE_F64, CGE_SCALAR, &d)};
    fx_tensor out = fxt(CGE_F64, CGE_SHAPE(N), want);
    run("Range", 11, 3, in, &out, 0, NULL);
    /* int64 near the limits counts exactly: 3 steps of 2^62 from INT64_MIN */
    int64_t is = INT64_MIN, il = INT64_MAX, id = (int64_t)1 << 62;
    int64_t iw[4] = {INT64_MIN, INT64_MIN + id, INT64_MIN + 2 * id, INT64_MIN + 2 * id + id};
    fx_tensor iin[3] = {fxt(CGE_I64, CGE_SCALAR, &is), fxt(CGE_I64, CGE_SCALAR, &il),
                        fxt(CGE_I64, CGE_SCALAR, &id)};
    fx_tensor iout = fxt(CGE_I64, CGE_SHAPE(4), iw);
    run("Range", 11, 3, iin, &iout, 0, NULL);
    /* int16, empty when the sign of delta points away */
    int16_t a = 5, b = 9, c = -1, dummy[1] = {0};
    fx_tensor hin[3] = {fxt(CGE_I16, CGE_SCALAR, &a), fxt(CGE_I16, CGE_SCALAR, &b),
                        fxt(CGE_I16, CGE_SCALAR, &c)};
    fx_tensor hout = fxt(CGE_I16, CGE_SHAPE(0), dummy);
    run("Range", 11, 3, hin, &hout, 0, NULL);
    free(want);
}

static void test_constant_of_shape_and_eyelike(void **state)
{
    int64_t shape[3] = {40, 30, 20};
    int64_t *want = malloc(sizeof(int64_t) * 24000);
    for (int i = 0; i < 24000; i++)
        want[i] = -42;
    int64_t v = -42;
    fx_tensor fvt = fxt(CGE_I64, CGE_SHAPE(1), &v);
    fx_attr at[1] = {{.name = "value", .kind = CGE_ATTR_TENSOR, .t = &fvt}};
    fx_tensor in[1] = {fxt(CGE_I64, CGE_SHAPE(3), shape)};
    fx_tensor out = fxt(CGE_I64, CGE_SHAPE(40, 30, 20), want);
    run("ConstantOfShape", 9, 1, in, &out, 1, at);
    /* no value: float32 zeros; an empty shape: a scalar */
    float z[1] = {0};
    fx_tensor in0[1] = {fxt(CGE_I64, CGE_SHAPE(0), shape)};
    fx_tensor out0 = fxt(CGE_F32, CGE_SCALAR, z);
    run("ConstantOfShape", 9, 1, in0, &out0, 0, NULL);
    /* EyeLike: bool output from an int input, k past the edges */
    int32_t x[12] = {0};
    uint8_t e[12];
    int64_t ks[4] = {1, -2, 9, INT64_MIN};
    for (int t = 0; t < 4; t++) {
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                e[i * 4 + j] = (int64_t)j - i == ks[t];
        fx_tensor ein[1] = {fxt(CGE_I32, CGE_SHAPE(3, 4), x)};
        fx_tensor eout = fxt(CGE_BOOL, CGE_SHAPE(3, 4), e);
        fx_attr eat[2] = {fxa_i("dtype", CGE_BOOL), fxa_i("k", ks[t])};
        run("EyeLike", 9, 1, ein, &eout, 2, eat);
    }
    free(want);
}

static void test_tile_large_and_scalar(void **state)
{
    enum { A = 3, B = 50, C = 7 };
    int64_t rep[3] = {4, 3, 100};
    uint16_t *x = malloc(sizeof(uint16_t) * A * B * C);
    for (int i = 0; i < A * B * C; i++)
        x[i] = (uint16_t)(i * 13);
    int64_t oa = A * 4, ob = B * 3, oc = C * 100;
    uint16_t *want = malloc(sizeof(uint16_t) * (size_t)(oa * ob * oc));
    for (int64_t i = 0; i < oa; i++)
        for (int64_t j = 0; j < ob; j++)
            for (int64_t k = 0; k < oc; k++)
                want[(i * ob + j) * oc + k] = x[((i % A) * B + j % B) * C + k % C];
    fx_tensor in[2] = {fxt(CGE_F16, CGE_SHAPE(A, B, C), x), fxt(CGE_I64, CGE_SHAPE(3), rep)};
    fx_tensor out = fxt(CGE_F16, CGE_SHAPE(oa, ob, oc), want);
    run("Tile", 13, 2, in, &out, 0, NULL);
    /* zero repeats give an empty dim; a scalar tiles to itself */
    int64_t rz[3] = {1, 0, 2};
    fx_tensor inz[2] = {fxt(CGE_F16, CGE_SHAPE(A, B, C), x), fxt(CGE_I64, CGE_SHAPE(3), rz)};
    fx_tensor outz = fxt(CGE_F16, CGE_SHAPE(A, 0, 2 * C), want);
    run("Tile", 13, 2, inz, &outz, 0, NULL);
    double sc = 2.5;
    fx_tensor ins[2] = {fxt(CGE_F64, CGE_SCALAR, &sc), fxt(CGE_I64, CGE_SHAPE(0), rz)};
    fx_tensor outs = fxt(CGE_F64, CGE_SCALAR, &sc);
    run("Tile", 13, 2, ins, &outs, 0, NULL);
    free(x);
    free(want);
}

static void test_size_empty(void **state)
{
    float d[1] = {0};
    int64_t zero = 0;
    fx_tensor in[1] = {fxt(CGE_F32, CGE_SHAPE(3, 0, 2), d)};
    fx_tensor out = fxt(CGE_I64, CGE_SCALAR, &zero);
    run("Size", 13, 1, in, &out, 0, NULL);
}

/* SpaceToDepth undoes DepthToSpace in DCR mode; CRD checked against the formula. */
static void test_depth_space_round_trip(void **state)
{
    enum { N = 2, C = 18, H = 20, W = 30, B = 3 };
    int32_t *x = malloc(sizeof(int32_t) * N * C * H * W);
    for (int i = 0; i < N * C * H * W; i++)
        x[i] = i * 7 - 1000;
    cge_tensor in = op_tensor(CGE_I32, CGE_SHAPE(N, C, H, W), x), mid, back;
    cge_attr at[2] = {CGE_ATTR_I("blocksize", B), CGE_ATTR_S("mode", "DCR")};
    assert_int_equal(op_run("DepthToSpace", &in, 1, at, 2, &mid, 1), CGE_OK);
    op_assert_shape(&mid, CGE_SHAPE(N, C / (B * B), H * B, W * B));
    assert_int_equal(op_run("SpaceToDepth", &mid, 1, at, 1, &back, 1), CGE_OK);
    op_assert_equal(&back, CGE_I32, CGE_SHAPE(N, C, H, W), x);
    op_free_outputs(&back, 1);
    op_free_outputs(&mid, 1);
    int32_t *want = malloc(sizeof(int32_t) * N * C * H * W);
    int oc = C / (B * B);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < oc; c++)
            for (int y = 0; y < H * B; y++)
                for (int xx = 0; xx < W * B; xx++)
                    want[((n * oc + c) * H * B + y) * W * B + xx] =
                        x[((n * C + c * B * B + (y % B) * B + xx % B) * H + y / B) * W + xx / B];
    at[1] = CGE_ATTR_S("mode", "CRD");
    assert_int_equal(op_run("DepthToSpace", &in, 1, at, 2, &mid, 1), CGE_OK);
    op_assert_equal(&mid, CGE_I32, CGE_SHAPE(N, oc, H * B, W * B), want);
    op_free_outputs(&mid, 1);
    free(x);
    free(want);
}

static void test_reverse_sequence_clamped(void **state)
{
    /* batch_axis 0, time_axis 1: [batch 3, time 4, 2]; lengths -1, 9 (clamped), 2 */
    float x[24], want[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    int64_t lens[3] = {-1, 9, 2};
    for (int b = 0; b < 3; b++) {
        int64_t L = lens[b] < 0 ? 0 : (lens[b] > 4 ? 4 : lens[b]);
        for (int t = 0; t < 4; t++) {
            int64_t st = t < L ? L - 1 - t : t;
            for (int e = 0; e < 2; e++)
                want[(b * 4 + t) * 2 + e] = x[(b * 4 + st) * 2 + e];
        }
    }
    fx_tensor in[2] = {fxt(CGE_F32, CGE_SHAPE(3, 4, 2), x), fxt(CGE_I64, CGE_SHAPE(3), lens)};
    fx_tensor out = fxt(CGE_F32, CGE_SHAPE(3, 4, 2), want);
    fx_attr at[2] = {fxa_i("batch_axis", 0), fxa_i("time_axis", 1)};
    run("ReverseSequence", 10, 2, in, &out, 2, at);
}

static void test_meta_dynamic_and_errors(void **state)
{
    cge_tensor_desc out[1] = {{.name = ""}};
    cge_tensor_desc rg[3] = {{.name = "", .dtype = CGE_F32, .shape = CGE_SCALAR},
                             {.name = "", .dtype = CGE_F32, .shape = CGE_SCALAR},
                             {.name = "", .dtype = CGE_F32, .shape = CGE_SCALAR}};
    assert_int_equal(op_infer("Range", rg, NULL, 3, NULL, 0, out, 1), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape}, CGE_SHAPE(CGE_DIM_DYNAMIC));
    float s = 0, l = 1, d = 0;
    const void *vals[3] = {&s, &l, &d};
    op_assert_error(op_infer("Range", rg, vals, 3, NULL, 0, out, 1), "[meta]",
                    "delta is 0; it must be nonzero");
    /* A NaN is named as the input it is (it was reported as a zero delta). */
    d = 1;
    l = NAN;
    op_assert_error(op_infer("Range", rg, vals, 3, NULL, 0, out, 1), "[meta]",
                    "limit is NaN; start, limit and delta must be numbers");
    l = 1;
    s = NAN;
    op_assert_error(op_infer("Range", rg, vals, 3, NULL, 0, out, 1), "[meta]", "start is NaN");
    s = 0;
    d = NAN;
    op_assert_error(op_infer("Range", rg, vals, 3, NULL, 0, out, 1), "[meta]", "delta is NaN");
    s = -INFINITY;
    l = INFINITY;
    d = 1;
    op_assert_error(op_infer("Range", rg, vals, 3, NULL, 0, out, 1), "[meta]",
                    "from -inf to inf by 1 has too many elements");
    s = l = INFINITY;
    op_assert_error(op_infer("Range", rg, vals, 3, NULL, 0, out, 1), "[meta]",
                    "has no defined length");
    /* an infinite step: the spec's max(ceil((limit - start) / delta), 0) is 0 */
    s = 0;
    l = 1;
    d = INFINITY;
    assert_int_equal(op_infer("Range", rg, vals, 3, NULL, 0, out, 1), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape}, CGE_SHAPE(0));
    int64_t is = 0, il = INT64_MAX, id = 1;
    const void *ivals[3] = {&is, &il, &id};
    cge_tensor_desc irg[3] = {{.name = "", .dtype = CGE_I64, .shape = CGE_SCALAR},
                              {.name = "", .dtype = CGE_I64, .shape = CGE_SCALAR},
                              {.name = "", .dtype = CGE_I64, .shape = CGE_SCALAR}};
    op_assert_error(op_infer("Range", irg, ivals, 3, NULL, 0, out, 1), "[meta]",
                    "too many elements");
    rg[2].dtype = CGE_F64;
    op_assert_error(op_infer("Range", rg, NULL, 3, NULL, 0, out, 1), "[meta]", "share");
    cge_tensor_desc cs = {.name = "", .dtype = CGE_I64, .shape = CGE_SHAPE(3)};
    assert_int_equal(op_infer("ConstantOfShape", &cs, NULL, 1, NULL, 0, out, 1), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape},
                    CGE_SHAPE(CGE_DIM_DYNAMIC, CGE_DIM_DYNAMIC, CGE_DIM_DYNAMIC));
    assert_int_equal(out[0].dtype, CGE_F32);
    int64_t neg[3] = {2, -1, 3};
    const void *nv[1] = {neg};
    op_assert_error(op_infer("ConstantOfShape", &cs, nv, 1, NULL, 0, out, 1), "[meta]",
                    "negative");
    cge_tensor_desc tl[2] = {{.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(0, 5)},
                             {.name = "", .dtype = CGE_I64, .shape = CGE_SHAPE(2)}};
    assert_int_equal(op_infer("Tile", tl, NULL, 2, NULL, 0, out, 1), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape}, CGE_SHAPE(0, CGE_DIM_DYNAMIC));
    tl[1].shape = CGE_SHAPE(3);
    op_assert_error(op_infer("Tile", tl, NULL, 2, NULL, 0, out, 1), "[meta]", "repeats");
    cge_tensor_desc ds = {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(1, 8, 2, 2)};
    cge_attr bs = CGE_ATTR_I("blocksize", 2);
    cge_attr bad_mode[2] = {CGE_ATTR_I("blocksize", 2), CGE_ATTR_S("mode", "XYZ")};
    op_assert_error(op_infer("DepthToSpace", &ds, NULL, 1, bad_mode, 2, out, 1), "[meta]", "XYZ");
    ds.shape = CGE_SHAPE(1, 8, 3, 2);
    op_assert_error(op_infer("SpaceToDepth", &ds, NULL, 1, &bs, 1, out, 1), "[meta]",
                    "multiple of blocksize");
    cge_tensor_desc ey = {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(3)};
    op_assert_error(op_infer("EyeLike", &ey, NULL, 1, NULL, 0, out, 1), "[meta]", "2-D");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onnx_cases),
        cmocka_unit_test(test_range_large_and_ints),
        cmocka_unit_test(test_constant_of_shape_and_eyelike),
        cmocka_unit_test(test_tile_large_and_scalar),
        cmocka_unit_test(test_size_empty),
        cmocka_unit_test(test_depth_space_round_trip),
        cmocka_unit_test(test_reverse_sequence_clamped),
        cmocka_unit_test(test_meta_dynamic_and_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
