/* Tests of ReduceSum, ReduceMean and ReduceMax (opset 13 axes attribute and
 * opset 18 axes input) against numpy references (reduce_fixtures.h) and hand
 * values: every axes pattern (rows, middle, strided), keepdims, noop, empty
 * reductions, rank 0, dtypes and meta errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "op_runner.h"
#include "ops/meta.h"
#include "reduce_fixtures.h"

static float *new_f32(cge_shape s, int seed)
{
    int64_t n = cge_shape_numel(&s);
    float *d = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        d[i] = (float)((double)((i * 37 + seed * 11) % 101) / 50.0 - 1.0);
    return d;
}

/* ---- running a given opset version --------------------------------------------- */

/* op_run takes the newest definition; the opset-13 forms of ReduceMean and
 * ReduceMax (axes attribute) need their own small runner. */
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

static cge_status run_v13(const char *op, cge_tensor x, const cge_attr *attrs, int32_t nattrs,
                          cge_tensor *out)
{
    memset(out, 0, sizeof *out);
    const cge_op_def *def = cge_op_find("", op, 13);
    if (!def)
        return cge_last_error_status();
    assert_int_equal(def->since_version, 13);
    cge_graph *g = NULL;
    cge_node *node = NULL;
    const char *ins[1] = {"x"}, *outs[1] = {"y"};
    cge_status st = cge_graph_create("v13", &g);
    if (!st)
        st = cge_graph_add_node(g, op, "", "node0", ins, 1, outs, 1, &node);
    for (int32_t i = 0; !st && i < nattrs; i++)
        st = cge_attrs_set(cge_node_attrs(node), &attrs[i]);
    cge_tensor_desc in_desc = {.name = "x", .dtype = x.dtype, .shape = x.shape};
    cge_tensor_desc out_desc = {.name = "y"};
    const void *values[1] = {x.data};
    if (!st)
        st = cge__op_infer_node(def, "node0", cge_node_attrs_const(node), &in_desc, values, 1,
                               &out_desc, 1);
    const cge_kernel_def *k = st ? NULL : cge_op_find_kernel(def, "cpu", x.dtype);
    if (!st && !k)
        st = cge_last_error_status();
    if (!st) {
        size_t nb = cge_tensor_nbytes(out_desc.dtype, &out_desc.shape);
        *out = (cge_tensor){.dtype = out_desc.dtype, .shape = out_desc.shape,
                            .data = malloc(nb ? nb : 1), .bytes = nb};
        cge_kernel_ctx ctx = {.op_type = op, .node_name = "node0", .num_inputs = 1,
                              .inputs = &x, .num_outputs = 1, .outputs = out,
                              .attrs = cge_node_attrs_const(node), .device = g_dev,
                              .num_threads = cge_device_num_threads(g_dev)};
        st = k->launch(&ctx, g_stream);
        cge_status sync = cge_stream_synchronize(g_stream);
        if (!st)
            st = sync;
    }
    cge_graph_destroy(g);
    return st;
}

/* ---- helpers ------------------------------------------------------------------------ */

static cge_attr attr_i(const char *name, int64_t v)
{
    return (cge_attr){.name = name, .kind = CGE_ATTR_INT, .i = v};
}

/* The reduced shape of `in` over `axes` (n < 0: all). */
static cge_shape reduced_shape(cge_shape in, const int64_t *axes, int n, bool keep)
{
    bool red[CGE_MAX_RANK] = {false};
    for (int32_t d = 0; d < in.rank; d++)
        red[d] = n <= 0;
    for (int i = 0; i < n; i++)
        red[axes[i] < 0 ? axes[i] + in.rank : axes[i]] = true;
    cge_shape out = {.rank = 0};
    for (int32_t d = 0; d < in.rank; d++)
        if (!red[d])
            out.dims[out.rank++] = in.dims[d];
        else if (keep)
            out.dims[out.rank++] = 1;
    return out;
}

/* Opset-18 form (ReduceSum 13 too): axes as an int64 input (n < 0: absent). */
static cge_tensor run_input(const char *op, cge_tensor x, const int64_t *axes, int n,
                            const cge_attr *attrs, int32_t nattrs)
{
    cge_tensor in[2] = {x, n >= 0 ? op_tensor(CGE_I64, CGE_SHAPE(n), axes) : op_absent()};
    cge_tensor out[1];
    if (op_run(op, in, n >= 0 ? 2 : 1, attrs, nattrs, out, 1) != CGE_OK)
        fail_msg("%s failed: %s", op, cge_last_error());
    return out[0];
}

static cge_tensor run_attr(const char *op, cge_tensor x, const int64_t *axes, int n, bool keep)
{
    cge_attr at[2] = {{.name = "axes", .kind = CGE_ATTR_INTS, .n = n, .ints = axes},
                      attr_i("keepdims", keep)};
    cge_tensor out[1];
    /* n < 0: no axes attribute at all */
    if (run_v13(op, x, n >= 0 ? at : at + 1, n >= 0 ? 2 : 1, out) != CGE_OK)
        fail_msg("%s (opset 13) failed: %s", op, cge_last_error());
    return out[0];
}

/* ---- float32 over every axes pattern ------------------------------------------------- */

typedef struct axes_case {
    int64_t axes[3];
    int n;
    const float *sum, *mean, *max;
} axes_case;

static void test_reduce_patterns(void **state)
{
    cge_shape s = CGE_SHAPE(2, 3, 4, 5);
    float *x = new_f32(s, 40);
    cge_tensor t = op_tensor(CGE_F32, s, x);
    const axes_case cases[] = {
        {{0}, -1, rd_sum_all, rd_mean_all, rd_max_all},
        {{0}, 0, rd_sum_all, rd_mean_all, rd_max_all},
        {{3}, 1, rd_sum_a3, rd_mean_a3, rd_max_a3},          /* last-axis rows */
        {{-1}, 1, rd_sum_a3, rd_mean_a3, rd_max_a3},
        {{1}, 1, rd_sum_a1, rd_mean_a1, rd_max_a1},          /* middle */
        {{0, 1}, 2, rd_sum_a01, rd_mean_a01, rd_max_a01},    /* leading */
        {{1, 3}, 2, rd_sum_a13, rd_mean_a13, rd_max_a13},    /* strided */
        {{-1, -3}, 2, rd_sum_a13, rd_mean_a13, rd_max_a13},
        {{0, 3}, 2, rd_sum_a03, rd_mean_a03, rd_max_a03},
        {{3, 2}, 2, rd_sum_a23, rd_mean_a23, rd_max_a23},
        {{0, 2, 3}, 3, rd_sum_a023, rd_mean_a023, rd_max_a023},
    };
    const char *ops[3] = {"ReduceSum", "ReduceMean", "ReduceMax"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const axes_case *k = &cases[c];
        const float *want[3] = {k->sum, k->mean, k->max};
        for (int keep = 0; keep < 2; keep++) {
            cge_shape ys = reduced_shape(s, k->axes, k->n, keep);
            cge_attr kd = attr_i("keepdims", keep);
            for (int o = 0; o < 3; o++) {
                cge_tensor y = run_input(ops[o], t, k->axes, k->n, &kd, 1);
                op_assert_close(&y, CGE_F32, ys, want[o], 1e-5, 1e-6);
                op_free_outputs(&y, 1);
                if (o == 0)
                    continue;
                y = run_attr(ops[o], t, k->axes, k->n, keep);
                op_assert_close(&y, CGE_F32, ys, want[o], 1e-5, 1e-6);
                free(y.data);
            }
        }
    }
    free(x);
}

static void test_reduce_long_and_wide(void **state)
{
    float *x = new_f32(CGE_SHAPE(3, 1000), 41);
    cge_tensor t = op_tensor(CGE_F32, CGE_SHAPE(3, 1000), x);
    const int64_t ax1[1] = {1};
    cge_attr kd0 = attr_i("keepdims", 0);
    cge_tensor y = run_input("ReduceSum", t, ax1, 1, &kd0, 1);
    op_assert_close(&y, CGE_F32, CGE_SHAPE(3), rd_long_sum, 1e-5, 1e-4);
    op_free_outputs(&y, 1);
    y = run_input("ReduceMax", t, ax1, 1, &kd0, 1);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3), rd_long_max);
    op_free_outputs(&y, 1);
    free(x);

    /* A middle axis with 130 inner positions: two full chunks and a partial. */
    x = new_f32(CGE_SHAPE(4, 5, 130), 42);
    t = op_tensor(CGE_F32, CGE_SHAPE(4, 5, 130), x);
    y = run_attr("ReduceMean", t, ax1, 1, true);
    op_assert_close(&y, CGE_F32, CGE_SHAPE(4, 1, 130), rd_wide_mean, 1e-5, 1e-6);
    free(y.data);
    y = run_attr("ReduceMax", t, ax1, 1, false);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(4, 130), rd_wide_max);
    free(y.data);
    free(x);
}

static void test_reduce_noop_and_scalar(void **state)
{
    float x[6] = {1, -2, 3, -4, 5, -6};
    cge_tensor t = op_tensor(CGE_F32, CGE_SHAPE(2, 3), x);
    cge_attr noop[2] = {attr_i("noop_with_empty_axes", 1), attr_i("keepdims", 0)};
    const int64_t none[1] = {0};
    cge_tensor y = run_input("ReduceSum", t, none, 0, noop, 2);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2, 3), x);
    op_free_outputs(&y, 1);
    y = run_input("ReduceMax", t, NULL, -1, noop, 2);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2, 3), x);
    op_free_outputs(&y, 1);
    /* Without noop, empty axes reduce everything. */
    const float total[1] = {-3};
    y = run_input("ReduceSum", t, none, 0, noop + 1, 1);
    op_assert_equal(&y, CGE_F32, CGE_SCALAR, total);
    op_free_outputs(&y, 1);

    /* Rank 0: the only reduction is the identity. */
    float s[1] = {2.5f};
    t = op_tensor(CGE_F32, CGE_SCALAR, s);
    y = run_input("ReduceSum", t, NULL, -1, NULL, 0);
    op_assert_equal(&y, CGE_F32, CGE_SCALAR, s);
    op_free_outputs(&y, 1);
    y = run_attr("ReduceMax", t, NULL, -1, true);
    op_assert_equal(&y, CGE_F32, CGE_SCALAR, s);
    free(y.data);
    y = run_input("ReduceMean", t, none, 0, NULL, 0);
    op_assert_equal(&y, CGE_F32, CGE_SCALAR, s);
    op_free_outputs(&y, 1);
}

/* Reducing an empty axis: sum 0, mean NaN (integers 0), max -inf (integers: the
 * type's minimum). */
static void test_reduce_empty(void **state)
{
    float dummy[1] = {0};
    cge_tensor t = op_tensor(CGE_F32, CGE_SHAPE(2, 0, 3), dummy);
    const int64_t ax1[1] = {1};
    float zeros[6], nans[6], ninf[6];
    for (int i = 0; i < 6; i++) {
        zeros[i] = 0;
        nans[i] = NAN;
        ninf[i] = -INFINITY;
    }
    cge_tensor y = run_input("ReduceSum", t, ax1, 1, NULL, 0);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2, 1, 3), zeros);
    op_free_outputs(&y, 1);
    y = run_input("ReduceMean", t, ax1, 1, NULL, 0);
    op_assert_close(&y, CGE_F32, CGE_SHAPE(2, 1, 3), nans, 0, 0);
    assert_true(isnan(((float *)y.data)[5]));
    op_free_outputs(&y, 1);
    y = run_attr("ReduceMax", t, ax1, 1, false);
    op_assert_close(&y, CGE_F32, CGE_SHAPE(2, 3), ninf, 0, 0);
    free(y.data);

    int32_t idummy[1] = {0};
    const int32_t imin[6] = {INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN};
    const int32_t izero[6] = {0};
    t = op_tensor(CGE_I32, CGE_SHAPE(2, 0, 3), idummy);
    y = run_input("ReduceMax", t, ax1, 1, NULL, 0);
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(2, 1, 3), imin);
    op_free_outputs(&y, 1);
    y = run_input("ReduceMean", t, ax1, 1, NULL, 0);
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(2, 1, 3), izero);
    op_free_outputs(&y, 1);

    /* Nothing to produce: a kept dim is empty. */
    t = op_tensor(CGE_F32, CGE_SHAPE(0, 4), dummy);
    y = run_input("ReduceSum", t, ax1, 1, NULL, 0);
    op_assert_shape(&y, CGE_SHAPE(0, 1));
    op_free_outputs(&y, 1);
}

static void test_reduce_dtypes(void **state)
{
    const int64_t ax0[1] = {0}, ax1[1] = {1}, ax02[2] = {0, 2};
    cge_attr kd0 = attr_i("keepdims", 0);
    double x64[12];
    for (int i = 0; i < 12; i++)
        x64[i] = (double)((i * 37 + 43 * 11) % 101) / 50.0 - 1.0;
    cge_tensor y = run_input("ReduceSum", op_tensor(CGE_F64, CGE_SHAPE(3, 4), x64), ax0, 1,
                             &kd0, 1);
    op_assert_close(&y, CGE_F64, CGE_SHAPE(4), rd_f64_sum, 1e-14, 1e-14);
    op_free_outputs(&y, 1);

    y = run_attr("ReduceMean", op_tensor(CGE_F16, CGE_SHAPE(2, 8), rd_f16_x), ax1, 1, false);
    op_assert_close(&y, CGE_F16, CGE_SHAPE(2), rd_f16_mean, 1e-3, 1e-3);
    free(y.data);

    uint16_t xb[4] = {cge_f32_to_bf16(-1.5f), cge_f32_to_bf16(2.25f), cge_f32_to_bf16(-8),
                      cge_f32_to_bf16(-0.5f)};
    uint16_t wb[2] = {cge_f32_to_bf16(2.25f), cge_f32_to_bf16(-0.5f)};
    y = run_input("ReduceMax", op_tensor(CGE_BF16, CGE_SHAPE(2, 2), xb), ax1, 1, &kd0, 1);
    op_assert_equal(&y, CGE_BF16, CGE_SHAPE(2), wb);
    op_free_outputs(&y, 1);

    int32_t x32[24];
    for (int i = 0; i < 24; i++)
        x32[i] = (i * 37 + 45 * 11) % 101 - 50;
    cge_tensor t = op_tensor(CGE_I32, CGE_SHAPE(2, 3, 4), x32);
    y = run_input("ReduceSum", t, ax02, 2, &kd0, 1);
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(3), rd_i32_sum);
    op_free_outputs(&y, 1);
    y = run_attr("ReduceMax", t, ax02, 2, true);
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(1, 3, 1), rd_i32_max);
    free(y.data);
    /* Integer means truncate toward zero. */
    y = run_attr("ReduceMean", t, ax02, 2, false);
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(3), rd_i32_mean);
    free(y.data);

    /* int64 beyond double's 53 bits stays exact. */
    const int64_t x6[3] = {INT64_C(1) << 60, 1, -(INT64_C(1) << 59)};
    const int64_t s6[1] = {(INT64_C(1) << 59) + 1}, m6[1] = {INT64_C(1) << 60};
    y = run_input("ReduceSum", op_tensor(CGE_I64, CGE_SHAPE(3), x6), NULL, -1, &kd0, 1);
    op_assert_equal(&y, CGE_I64, CGE_SCALAR, s6);
    op_free_outputs(&y, 1);
    y = run_input("ReduceMax", op_tensor(CGE_I64, CGE_SHAPE(3), x6), NULL, -1, &kd0, 1);
    op_assert_equal(&y, CGE_I64, CGE_SCALAR, m6);
    op_free_outputs(&y, 1);

    uint64_t xu[24];
    for (int i = 0; i < 24; i++)
        xu[i] = (uint64_t)((i * 37 + 46 * 11) % 101);
    y = run_input("ReduceSum", op_tensor(CGE_U64, CGE_SHAPE(2, 3, 4), xu), ax1, 1, &kd0, 1);
    op_assert_equal(&y, CGE_U64, CGE_SHAPE(2, 4), rd_u64_sum);
    op_free_outputs(&y, 1);

    const uint32_t xu32[4] = {7, 8, UINT32_MAX, 1}, mu32[2] = {7, 2147483648u};
    y = run_input("ReduceMean", op_tensor(CGE_U32, CGE_SHAPE(2, 2), xu32), ax1, 1, &kd0, 1);
    op_assert_equal(&y, CGE_U32, CGE_SHAPE(2), mu32);
    op_free_outputs(&y, 1);

    const int8_t x8[4] = {-128, -7, 5, -100}, m8[2] = {-7, 5};
    y = run_attr("ReduceMax", op_tensor(CGE_I8, CGE_SHAPE(2, 2), x8), ax1, 1, false);
    op_assert_equal(&y, CGE_I8, CGE_SHAPE(2), m8);
    free(y.data);
    const uint8_t xu8[4] = {200, 3, 255, 0}, mu8[2] = {255, 3};
    y = run_input("ReduceMax", op_tensor(CGE_U8, CGE_SHAPE(2, 2), xu8), ax0, 1, &kd0, 1);
    op_assert_equal(&y, CGE_U8, CGE_SHAPE(2), mu8);
    op_free_outputs(&y, 1);

    /* NaN wins a max, as in numpy. */
    const float xn[4] = {1, NAN, 3, 2};
    y = run_input("ReduceMax", op_tensor(CGE_F32, CGE_SHAPE(4), xn), NULL, -1, &kd0, 1);
    assert_true(isnan(((float *)y.data)[0]));
    op_free_outputs(&y, 1);
}

static void test_reduce_meta(void **state)
{
    cge_tensor_desc in[2] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(2, 3, 4)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(2)}};
    cge_tensor_desc out[1] = {{.name = "y"}};
    int64_t bad[2] = {1, 3}, dup[2] = {1, -2}, ok[2] = {0, 2};
    const void *vals[2] = {NULL, bad};
    op_assert_error(op_infer("ReduceSum", in, vals, 2, NULL, 0, out, 1), "[meta]",
                    "axis 3 is out of range");
    op_assert_error(op_infer("ReduceSum", in, vals, 2, NULL, 0, out, 1), "[meta]", "node0");
    vals[1] = dup;
    op_assert_error(op_infer("ReduceMean", in, vals, 2, NULL, 0, out, 1), "[meta]",
                    "more than once");
    /* Unknown axes: keepdims=1 gives the rank and size-1 dims; keepdims=0
     * the rank (input rank minus the number of axes), every dim unknown. */
    vals[1] = NULL;
    assert_int_equal(op_infer("ReduceSum", in, vals, 2, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].shape.rank, 3);
    assert_int_equal(out[0].shape.dims[0], CGE_DIM_DYNAMIC);
    cge_attr kd0 = attr_i("keepdims", 0);
    assert_int_equal(op_infer("ReduceMax", in, vals, 2, &kd0, 1, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(CGE_DIM_DYNAMIC)));
    in[1].shape = CGE_SHAPE(4); /* more axes than dims */
    op_assert_error(op_infer("ReduceMax", in, vals, 2, &kd0, 1, out, 1), "[meta]",
                    "4 axes for a rank-3 input");
    in[1].shape = CGE_SHAPE(2);
    vals[1] = ok;
    assert_int_equal(op_infer("ReduceSum", in, vals, 2, &kd0, 1, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(3)));
    in[1].shape = CGE_SHAPE(1, 2);
    op_assert_error(op_infer("ReduceSum", in, vals, 2, NULL, 0, out, 1), "[meta]", "1-D");

    /* The opset-13 attribute form checks its axes too. */
    const cge_op_def *def = cge_op_find("", "ReduceMax", 13);
    assert_non_null(def);
    cge_graph *g = NULL;
    cge_node *n = NULL;
    const char *ins[1] = {"x"}, *outs[1] = {"y"};
    assert_int_equal(cge_graph_create("m", &g), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "ReduceMax", "", "rmax", ins, 1, outs, 1, &n), CGE_OK);
    assert_int_equal(cge_node_set_ints(n, "axes", bad, 2), CGE_OK);
    cge_status st = cge__op_infer_node(def, "rmax", cge_node_attrs_const(n), in, NULL, 1, out, 1);
    op_assert_error(st, "[meta]", "rmax");
    op_assert_error(st, "[meta]", "out of range");
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_patterns),  cmocka_unit_test(test_reduce_long_and_wide),
        cmocka_unit_test(test_reduce_noop_and_scalar), cmocka_unit_test(test_reduce_empty),
        cmocka_unit_test(test_reduce_dtypes),    cmocka_unit_test(test_reduce_meta),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
