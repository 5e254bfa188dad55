/* Tests of the data-movement family (src/ops/transform.c): Transpose, Concat,
 * Split, Slice and Gather against numpy references (transform_fixtures.h,
 * from gen_transform_fixtures.py) and naive C loops for large shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "op_runner.h"
#include "ops/kernel_util.h"
#include "transform_fixtures.h"

#define LEN(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

static cge_attr attr_int(const char *name, int64_t v)
{
    return (cge_attr){.name = name, .kind = CGE_ATTR_INT, .i = v};
}

static cge_attr attr_ints(const char *name, const int64_t *v, int64_t n)
{
    return (cge_attr){.name = name, .kind = CGE_ATTR_INTS, .ints = v, .n = n};
}

/* A [meta] error that names the node and says `needle`. */
static void assert_meta_error(cge_status st, const char *needle)
{
    op_assert_error(st, "[meta]", "'node0'");
    op_assert_error(st, "[meta]", needle);
}

/* Element `i` of an arange in `dtype` (values small enough for every dtype). */
static void *arange(cge_dtype dtype, int64_t n, int64_t mod)
{
    size_t es = cge_dtype_size(dtype);
    unsigned char *p = malloc((size_t)(n ? n : 1) * es);
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = mod ? i % mod : i;
        switch (dtype) {
        case CGE_F32: ((float *)p)[i] = (float)v; break;
        case CGE_F64: ((double *)p)[i] = (double)v; break;
        case CGE_F16: ((uint16_t *)p)[i] = cge_f32_to_f16((float)v); break;
        case CGE_BF16: ((uint16_t *)p)[i] = cge_f32_to_bf16((float)v); break;
        case CGE_I32: ((int32_t *)p)[i] = (int32_t)v; break;
        case CGE_I64: ((int64_t *)p)[i] = v; break;
        case CGE_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
        case CGE_BOOL: ((uint8_t *)p)[i] = (uint8_t)(v & 1); break;
        default: fail_msg("arange: dtype %s", cge_dtype_name(dtype));
        }
    }
    return p;
}

/* ---- Transpose ---------------------------------------------------------- */

static cge_status run_transpose(cge_tensor x, const int64_t *perm, int64_t n, cge_tensor *y)
{
    cge_attr a = attr_ints("perm", perm, n);
    return op_run("Transpose", &x, 1, perm ? &a : NULL, perm ? 1 : 0, y, 1);
}

static void test_transpose_f32_perms(void **state)
{
    static const int64_t p102[] = {1, 0, 2}, p201[] = {2, 0, 1}, p021[] = {0, 2, 1};
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(2, 3, 4), tr_x), y;
    assert_int_equal(run_transpose(x, p102, 3, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3, 2, 4), tr_102);
    op_free_outputs(&y, 1);
    assert_int_equal(run_transpose(x, p201, 3, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(4, 2, 3), tr_201);
    op_free_outputs(&y, 1);
    assert_int_equal(run_transpose(x, p021, 3, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2, 4, 3), tr_021);
    op_free_outputs(&y, 1);
    /* No perm: the dims reversed. */
    assert_int_equal(run_transpose(x, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(4, 3, 2), tr_rev);
    op_free_outputs(&y, 1);
}

static void test_transpose_f16_nchw_to_nhwc(void **state)
{
    static const int64_t perm[] = {0, 2, 3, 1};
    cge_tensor y;
    assert_int_equal(run_transpose(op_tensor(CGE_F16, CGE_SHAPE(2, 3, 4, 5), tr_h), perm, 4, &y), CGE_OK);
    op_assert_equal(&y, CGE_F16, CGE_SHAPE(2, 4, 5, 3), tr_h_0231);
    op_free_outputs(&y, 1);
}

static void test_transpose_int64_bool(void **state)
{
    cge_tensor y;
    assert_int_equal(run_transpose(op_tensor(CGE_I64, CGE_SHAPE(3, 5), tr_i64), NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(5, 3), tr_i64_t);
    op_free_outputs(&y, 1);
    static const uint8_t b[] = {1, 0, 0, 1, 1, 0}, bt[] = {1, 1, 0, 1, 0, 0};
    assert_int_equal(run_transpose(op_tensor(CGE_BOOL, CGE_SHAPE(2, 3), b), NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(3, 2), bt);
    op_free_outputs(&y, 1);
}

/* Naive reference: output index -> input index through perm. */
static void check_transpose_naive(cge_dtype dtype, cge_shape s, const int64_t *perm)
{
    int64_t n = cge_shape_numel(&s);
    size_t es = cge_dtype_size(dtype);
    void *x = arange(dtype, n, 251);
    cge_tensor y;
    assert_int_equal(run_transpose(op_tensor(dtype, s, x), perm, s.rank, &y), CGE_OK);
    cge_shape os = s;
    for (int32_t i = 0; i < s.rank; i++)
        os.dims[i] = s.dims[perm[i]];
    op_assert_shape(&y, os);
    int64_t in_strides[CGE_MAX_RANK];
    cge_shape_strides(&s, in_strides);
    unsigned char *want = malloc((size_t)n * es);
    assert_non_null(want);
    for (int64_t o = 0; o < n; o++) {
        int64_t rem = o, off = 0;
        for (int32_t d = os.rank - 1; d >= 0; d--) {
            off += (rem % os.dims[d]) * in_strides[perm[d]];
            rem /= os.dims[d];
        }
        memcpy(want + o * (int64_t)es, (unsigned char *)x + off * (int64_t)es, es);
    }
    op_assert_equal(&y, dtype, os, want);
    op_free_outputs(&y, 1);
    free(want);
    free(x);
}

static void test_transpose_large_blocked(void **state)
{
    static const int64_t p10[] = {1, 0}, p021[] = {0, 2, 1}, p3102[] = {3, 1, 0, 2},
                         p1023[] = {1, 0, 2, 3}, p210[] = {2, 1, 0};
    check_transpose_naive(CGE_F32, CGE_SHAPE(200, 130), p10);      /* many tiles, several blocks */
    check_transpose_naive(CGE_U8, CGE_SHAPE(3, 70, 45), p021);     /* batched last-two */
    check_transpose_naive(CGE_F64, CGE_SHAPE(5, 6, 7, 8), p3102);  /* tile + batch dims */
    check_transpose_naive(CGE_BF16, CGE_SHAPE(9, 33, 2, 31), p1023); /* inner dims kept: rows */
    check_transpose_naive(CGE_I32, CGE_SHAPE(33, 1, 65), p210);    /* size-1 dim dropped */
}

static void test_transpose_scalar_and_empty(void **state)
{
    static const float v = 3.5f;
    cge_tensor y;
    assert_int_equal(run_transpose(op_tensor(CGE_F32, CGE_SCALAR, &v), NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SCALAR, &v);
    op_free_outputs(&y, 1);
    static const float dummy = 0;
    assert_int_equal(run_transpose(op_tensor(CGE_F32, CGE_SHAPE(0, 3), &dummy), NULL, 0, &y), CGE_OK);
    op_assert_shape(&y, CGE_SHAPE(3, 0));
    op_free_outputs(&y, 1);
}

static void test_transpose_errors(void **state)
{
    static const int64_t dup[] = {0, 0, 1}, shortp[] = {1, 0}, big[] = {0, 1, 3};
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(2, 3, 4), tr_x), y;
    assert_meta_error(run_transpose(x, dup, 3, &y), "not a permutation");
    assert_meta_error(run_transpose(x, shortp, 2, &y), "perm has 2 entries");
    assert_meta_error(run_transpose(x, big, 3, &y), "entry 2 is 3");
}

/* ---- Concat ------------------------------------------------------------- */

static void test_concat_f32_axes(void **state)
{
    cge_tensor in[3] = {op_tensor(CGE_F32, CGE_SHAPE(2, 2), cc_a), op_tensor(CGE_F32, CGE_SHAPE(2, 3), cc_b),
                        op_tensor(CGE_F32, CGE_SHAPE(2, 1), cc_c)};
    cge_tensor y;
    cge_attr ax = attr_int("axis", 1);
    assert_int_equal(op_run("Concat", in, 3, &ax, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2, 6), cc_abc_ax1);
    op_free_outputs(&y, 1);
    ax = attr_int("axis", -1);
    assert_int_equal(op_run("Concat", in, 3, &ax, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2, 6), cc_abc_ax1);
    op_free_outputs(&y, 1);
}

static void test_concat_int64_and_empty(void **state)
{
    cge_attr ax = attr_int("axis", 0);
    cge_tensor in[2] = {op_tensor(CGE_I64, CGE_SHAPE(2, 3), cc_p), op_tensor(CGE_I64, CGE_SHAPE(3, 3), cc_q)};
    cge_tensor y;
    assert_int_equal(op_run("Concat", in, 2, &ax, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(5, 3), cc_pq_ax0);
    op_free_outputs(&y, 1);
    /* An input empty along the axis contributes nothing. */
    in[0] = op_tensor(CGE_I64, CGE_SHAPE(0, 3), cc_p);
    assert_int_equal(op_run("Concat", in, 2, &ax, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(3, 3), cc_q);
    op_free_outputs(&y, 1);
    /* All empty off the axis: an empty result. */
    cge_tensor e[2] = {op_tensor(CGE_I64, CGE_SHAPE(0, 2), cc_p), op_tensor(CGE_I64, CGE_SHAPE(0, 1), cc_p)};
    ax = attr_int("axis", 1);
    assert_int_equal(op_run("Concat", e, 2, &ax, 1, &y, 1), CGE_OK);
    op_assert_shape(&y, CGE_SHAPE(0, 3));
    op_free_outputs(&y, 1);
}

static void test_concat_f16_bool(void **state)
{
    uint16_t h1[2] = {cge_f32_to_f16(1.5f), cge_f32_to_f16(-2.0f)}, h2[1] = {cge_f32_to_f16(0.25f)};
    uint16_t hw[3] = {h1[0], h1[1], h2[0]};
    cge_attr ax = attr_int("axis", 0);
    cge_tensor in[2] = {op_tensor(CGE_F16, CGE_SHAPE(2), h1), op_tensor(CGE_F16, CGE_SHAPE(1), h2)};
    cge_tensor y;
    assert_int_equal(op_run("Concat", in, 2, &ax, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F16, CGE_SHAPE(3), hw);
    op_free_outputs(&y, 1);
    static const uint8_t b1[] = {1, 0, 0, 1}, b2[] = {1, 1}, bw[] = {1, 0, 1, 0, 1, 1};
    cge_tensor bin[2] = {op_tensor(CGE_BOOL, CGE_SHAPE(2, 2), b1), op_tensor(CGE_BOOL, CGE_SHAPE(2, 1), b2)};
    ax = attr_int("axis", 1);
    assert_int_equal(op_run("Concat", bin, 2, &ax, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(2, 3), bw);
    op_free_outputs(&y, 1);
}

/* Large enough that blocks start and end inside parts. */
static void test_concat_large(void **state)
{
    const int64_t rows = 300, w[3] = {100, 257, 43};
    float *in[3];
    cge_tensor t[3];
    for (int i = 0; i < 3; i++) {
        in[i] = malloc((size_t)(rows * w[i]) * sizeof(float));
        assert_non_null(in[i]);
        for (int64_t k = 0; k < rows * w[i]; k++)
            in[i][k] = (float)(i * 1000000 + k);
        t[i] = op_tensor(CGE_F32, CGE_SHAPE(rows, w[i]), in[i]);
    }
    int64_t total = w[0] + w[1] + w[2];
    float *want = malloc((size_t)(rows * total) * sizeof(float));
    assert_non_null(want);
    for (int64_t r = 0; r < rows; r++)
        for (int i = 0, col = 0; i < 3; col += (int)w[i], i++)
            memcpy(want + r * total + col, in[i] + r * w[i], (size_t)w[i] * sizeof(float));
    cge_attr ax = attr_int("axis", 1);
    cge_tensor y;
    assert_int_equal(op_run("Concat", t, 3, &ax, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(rows, total), want);
    op_free_outputs(&y, 1);
    free(want);
    for (int i = 0; i < 3; i++)
        free(in[i]);
}

/* More inputs than one launch carries (op_runner takes at most 32), so the
 * kernel is launched directly on a device of our own. */
static void test_concat_many_inputs_direct(void **state)
{
    enum { N = 150, ROWS = 64, W = 40 };
    const cge_op_def *def = cge_op_find("", "Concat", 0);
    assert_non_null(def);
    const cge_kernel_def *k = cge_op_find_kernel(def, "cpu", CGE_F32);
    assert_non_null(k);
    cge_graph *g = NULL;
    cge_node *node = NULL;
    const char *ins[] = {"x"}, *outs[] = {"y"};
    assert_int_equal(cge_graph_create("many", &g), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Concat", NULL, "big", ins, 1, outs, 1, &node), CGE_OK);
    assert_int_equal(cge_node_set_int(node, "axis", 1), CGE_OK);
    cge_device *dev = NULL;
    cge_stream *stream = NULL;
    assert_int_equal(cge_device_create_cpu(NULL, &dev), CGE_OK);
    assert_int_equal(cge_stream_create(dev, &stream), CGE_OK);
    cge_tensor *t = calloc(N, sizeof *t);
    float *data = malloc(sizeof(float) * N * ROWS * W), *out = malloc(sizeof(float) * N * ROWS * W);
    assert_non_null(t);
    assert_non_null(data);
    assert_non_null(out);
    for (int64_t i = 0; i < (int64_t)N * ROWS * W; i++)
        data[i] = (float)i;
    for (int i = 0; i < N; i++)
        t[i] = op_tensor(CGE_F32, CGE_SHAPE(ROWS, W), data + (int64_t)i * ROWS * W);
    cge_tensor y = op_tensor(CGE_F32, CGE_SHAPE(ROWS, (int64_t)N * W), out);
    cge_kernel_ctx ctx = {.op_type = "Concat", .node_name = "big", .num_inputs = N, .inputs = t,
                          .num_outputs = 1, .outputs = &y, .attrs = cge_node_attrs_const(node),
                          .device = dev, .num_threads = cge_device_num_threads(dev)};
    assert_int_equal(k->launch(&ctx, stream), CGE_OK);
    assert_int_equal(cge_stream_synchronize(stream), CGE_OK);
    for (int64_t r = 0; r < ROWS; r++)
        for (int64_t c = 0; c < (int64_t)N * W; c++) {
            int64_t i = c / W, j = c % W;
            float want = data[i * ROWS * W + r * W + j];
            if (out[r * N * W + c] != want)
                fail_msg("row %lld col %lld: got %g, expected %g", (long long)r, (long long)c,
                         out[r * N * W + c], want);
        }
    free(out);
    free(data);
    free(t);
    cge_stream_destroy(stream);
    cge_device_destroy(dev);
    cge_graph_destroy(g);
}

static void test_concat_errors(void **state)
{
    cge_attr ax = attr_int("axis", 1);
    cge_tensor y;
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(2, 2), cc_a), op_tensor(CGE_F32, CGE_SHAPE(3, 1), cc_b)};
    assert_meta_error(op_run("Concat", in, 2, &ax, 1, &y, 1), "dim 0 differs");
    in[1] = op_tensor(CGE_I64, CGE_SHAPE(2, 1), cc_p);
    assert_meta_error(op_run("Concat", in, 2, &ax, 1, &y, 1), "input 1 is int64");
    in[1] = op_tensor(CGE_F32, CGE_SHAPE(2), cc_b);
    assert_meta_error(op_run("Concat", in, 2, &ax, 1, &y, 1), "ranks differ");
    ax = attr_int("axis", 2);
    in[1] = op_tensor(CGE_F32, CGE_SHAPE(2, 3), cc_b);
    assert_meta_error(op_run("Concat", in, 2, &ax, 1, &y, 1), "axis 2 is out of range");
    ax = attr_int("axis", 0);
    cge_tensor s[2] = {op_tensor(CGE_F32, CGE_SCALAR, cc_a), op_tensor(CGE_F32, CGE_SCALAR, cc_b)};
    assert_meta_error(op_run("Concat", s, 2, &ax, 1, &y, 1), "rank >= 1");
}

static void test_concat_dynamic_meta(void **state)
{
    cge_tensor_desc in[2] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(CGE_DIM_DYNAMIC, 3)},
                             {.dtype = CGE_F32, .shape = CGE_SHAPE(2, 4)}};
    cge_tensor_desc out = {0};
    cge_attr ax = attr_int("axis", 1);
    assert_int_equal(op_infer("Concat", in, NULL, 2, &ax, 1, &out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out.shape, &CGE_SHAPE(2, 7)));
    ax = attr_int("axis", 0);
    in[1].shape = CGE_SHAPE(2, 3);
    assert_int_equal(op_infer("Concat", in, NULL, 2, &ax, 1, &out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out.shape, &CGE_SHAPE(CGE_DIM_DYNAMIC, 3)));
}

/* ---- Split -------------------------------------------------------------- */

static void test_split_with_sizes(void **state)
{
    static const int64_t sizes[] = {1, 2, 3};
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(2, 6), sp_x), op_tensor(CGE_I64, CGE_SHAPE(3), sizes)};
    cge_tensor y[3];
    for (int64_t axis = 1; axis >= -1; axis -= 2) {
        cge_attr ax = attr_int("axis", axis);
        assert_int_equal(op_run("Split", in, 2, &ax, 1, y, 3), CGE_OK);
        op_assert_equal(&y[0], CGE_F32, CGE_SHAPE(2, 1), sp_123_0);
        op_assert_equal(&y[1], CGE_F32, CGE_SHAPE(2, 2), sp_123_1);
        op_assert_equal(&y[2], CGE_F32, CGE_SHAPE(2, 3), sp_123_2);
        op_free_outputs(y, 3);
    }
    /* A piece of size 0. */
    static const int64_t zero_six[] = {0, 6};
    in[1] = op_tensor(CGE_I64, CGE_SHAPE(2), zero_six);
    cge_attr ax = attr_int("axis", 1);
    assert_int_equal(op_run("Split", in, 2, &ax, 1, y, 2), CGE_OK);
    op_assert_shape(&y[0], CGE_SHAPE(2, 0));
    op_assert_equal(&y[1], CGE_F32, CGE_SHAPE(2, 6), sp_x);
    op_free_outputs(y, 2);
}

static void test_split_equal(void **state)
{
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(2, 6), sp_x), y[3];
    /* axis defaults to 0 */
    assert_int_equal(op_run("Split", &x, 1, NULL, 0, y, 2), CGE_OK);
    op_assert_equal(&y[0], CGE_F32, CGE_SHAPE(1, 6), sp_even0_0);
    op_assert_equal(&y[1], CGE_F32, CGE_SHAPE(1, 6), sp_even0_1);
    op_free_outputs(y, 2);
    static const int64_t v[] = {5, -6, 7, 8, -9, 10}, w0[] = {5, -6}, w1[] = {7, 8}, w2[] = {-9, 10};
    cge_tensor xi = op_tensor(CGE_I64, CGE_SHAPE(6), v);
    assert_int_equal(op_run("Split", &xi, 1, NULL, 0, y, 3), CGE_OK);
    op_assert_equal(&y[0], CGE_I64, CGE_SHAPE(2), w0);
    op_assert_equal(&y[1], CGE_I64, CGE_SHAPE(2), w1);
    op_assert_equal(&y[2], CGE_I64, CGE_SHAPE(2), w2);
    op_free_outputs(y, 3);
    static const uint8_t b[] = {1, 0, 0, 1}, b0[] = {1, 0}, b1[] = {0, 1};
    cge_tensor xb = op_tensor(CGE_BOOL, CGE_SHAPE(2, 2), b);
    cge_attr ax = attr_int("axis", -1);
    assert_int_equal(op_run("Split", &xb, 1, &ax, 1, y, 2), CGE_OK);
    op_assert_equal(&y[0], CGE_BOOL, CGE_SHAPE(2, 1), b0);
    op_assert_equal(&y[1], CGE_BOOL, CGE_SHAPE(2, 1), b1);
    op_free_outputs(y, 2);
}

static void test_split_large_f16(void **state)
{
    const int64_t rows = 256, cols = 1000, sz[3] = {100, 500, 400};
    uint16_t *x = arange(CGE_F16, rows * cols, 1024);
    cge_tensor in[2] = {op_tensor(CGE_F16, CGE_SHAPE(rows, cols), x), op_tensor(CGE_I64, CGE_SHAPE(3), sz)};
    cge_attr ax = attr_int("axis", 1);
    cge_tensor y[3];
    assert_int_equal(op_run("Split", in, 2, &ax, 1, y, 3), CGE_OK);
    for (int i = 0, col = 0; i < 3; col += (int)sz[i], i++) {
        uint16_t *want = malloc((size_t)(rows * sz[i]) * 2);
        assert_non_null(want);
        for (int64_t r = 0; r < rows; r++)
            memcpy(want + r * sz[i], x + r * cols + col, (size_t)sz[i] * 2);
        op_assert_equal(&y[i], CGE_F16, CGE_SHAPE(rows, sz[i]), want);
        free(want);
    }
    op_free_outputs(y, 3);
    free(x);
}

static void test_split_errors(void **state)
{
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(2, 6), sp_x), y[4];
    cge_attr ax = attr_int("axis", 1);
    assert_meta_error(op_run("Split", &x, 1, &ax, 1, y, 4), "does not split evenly");
    static const int64_t ones[] = {1, 1, 1};
    cge_tensor in[2] = {x, op_tensor(CGE_I64, CGE_SHAPE(3), ones)};
    assert_meta_error(op_run("Split", in, 2, &ax, 1, y, 3), "adds up to 3");
    assert_meta_error(op_run("Split", in, 2, &ax, 1, y, 2), "3 entries for 2 outputs");
    ax = attr_int("axis", -3);
    assert_meta_error(op_run("Split", &x, 1, &ax, 1, y, 2), "axis -3 is out of range");
}

static void test_split_dynamic_meta(void **state)
{
    cge_tensor_desc in[2] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(2, 6)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(2)}};
    const void *vals[2] = {NULL, NULL};
    cge_tensor_desc out[2] = {{0}, {0}};
    cge_attr ax = attr_int("axis", 1);
    assert_int_equal(op_infer("Split", in, vals, 2, &ax, 1, out, 2), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(2, CGE_DIM_DYNAMIC)));
    assert_true(cge_shape_equal(&out[1].shape, &CGE_SHAPE(2, CGE_DIM_DYNAMIC)));
}

/* ---- Slice -------------------------------------------------------------- */

/* Runs slice case `c` on data `x` with index lists of `idx_dtype`. */
static cge_status run_slice_case(const slice_case *c, cge_tensor x, cge_dtype idx_dtype, cge_tensor *y)
{
    static int32_t s32[4][3];
    const int64_t *lists[4] = {c->starts, c->ends, c->axes, c->steps};
    cge_tensor in[5];
    in[0] = x;
    for (int i = 0; i < 4; i++) {
        bool present = i < 2 || (i == 2 && c->has_axes) || (i == 3 && c->has_steps);
        if (!present) {
            in[i + 1] = op_absent();
            continue;
        }
        if (idx_dtype == CGE_I32) {
            for (int k = 0; k < c->n; k++)
                s32[i][k] = (int32_t)lists[i][k];
            in[i + 1] = op_tensor(CGE_I32, CGE_SHAPE(c->n), s32[i]);
        } else {
            in[i + 1] = op_tensor(CGE_I64, CGE_SHAPE(c->n), lists[i]);
        }
    }
    return op_run("Slice", in, 5, NULL, 0, y, 1);
}

static void test_slice_cases_f32(void **state)
{
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(3, 4, 5), sl_x), y;
    for (int64_t i = 0; i < LEN(slice_cases); i++) {
        const slice_case *c = &slice_cases[i];
        cge_shape want = CGE_SHAPE(c->out_dims[0], c->out_dims[1], c->out_dims[2]);
        assert_int_equal(run_slice_case(c, x, CGE_I64, &y), CGE_OK);
        op_assert_equal(&y, CGE_F32, want, sl_expected + c->offset);
        op_free_outputs(&y, 1);
    }
    /* int32 index lists (cases without INT64 extremes). */
    static const int i32_cases[] = {0, 3, 6, 7};
    for (int k = 0; k < 4; k++) {
        const slice_case *c = &slice_cases[i32_cases[k]];
        cge_shape want = CGE_SHAPE(c->out_dims[0], c->out_dims[1], c->out_dims[2]);
        assert_int_equal(run_slice_case(c, x, CGE_I32, &y), CGE_OK);
        op_assert_equal(&y, CGE_F32, want, sl_expected + c->offset);
        op_free_outputs(&y, 1);
    }
}

/* Every dtype class on arange data: the expected values are the sliced indices. */
static void test_slice_dtypes(void **state)
{
    static const cge_dtype types[] = {CGE_F64, CGE_F16, CGE_BF16, CGE_I64, CGE_I32, CGE_U8};
    for (int t = 0; t < 6; t++) {
        void *x = arange(types[t], 60, 0);
        for (int64_t i = 0; i < LEN(slice_cases); i++) {
            const slice_case *c = &slice_cases[i];
            cge_shape want = CGE_SHAPE(c->out_dims[0], c->out_dims[1], c->out_dims[2]);
            int64_t n = cge_shape_numel(&want);
            void *w = malloc(cge_dtype_size(types[t]) * (size_t)(n ? n : 1));
            assert_non_null(w);
            for (int64_t k = 0; k < n; k++)
                cge__store_from_double(types[t], w, k, (double)sl_index_expected[c->offset + k]);
            cge_tensor y;
            assert_int_equal(run_slice_case(c, op_tensor(types[t], CGE_SHAPE(3, 4, 5), x), CGE_I64, &y), CGE_OK);
            op_assert_equal(&y, types[t], want, w);
            free(w);
            op_free_outputs(&y, 1);
        }
        free(x);
    }
}

static void test_slice_bool_and_empty_input(void **state)
{
    static const uint8_t b[] = {1, 0, 0, 1, 1, 0};
    static const int64_t s[] = {-1}, e[] = {INT64_MIN}, st[] = {-1}, one[] = {1}, three[] = {3}, ax1[] = {1};
    cge_tensor in[5] = {op_tensor(CGE_BOOL, CGE_SHAPE(6), b), op_tensor(CGE_I64, CGE_SHAPE(1), s),
                        op_tensor(CGE_I64, CGE_SHAPE(1), e), op_absent(), op_tensor(CGE_I64, CGE_SHAPE(1), st)};
    cge_tensor y;
    /* b[::-1] */
    assert_int_equal(op_run("Slice", in, 5, NULL, 0, &y, 1), CGE_OK);
    static const uint8_t rev[] = {0, 1, 1, 0, 0, 1};
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(6), rev);
    op_free_outputs(&y, 1);
    /* Empty data: [0,4][:, 1:3] is [0,2]. */
    static const float dummy = 0;
    cge_tensor ein[4] = {op_tensor(CGE_F32, CGE_SHAPE(0, 4), &dummy), op_tensor(CGE_I64, CGE_SHAPE(1), one),
                         op_tensor(CGE_I64, CGE_SHAPE(1), three), op_tensor(CGE_I64, CGE_SHAPE(1), ax1)};
    assert_int_equal(op_run("Slice", ein, 4, NULL, 0, &y, 1), CGE_OK);
    op_assert_shape(&y, CGE_SHAPE(0, 2));
    op_free_outputs(&y, 1);
}

static void test_slice_errors(void **state)
{
    static const int64_t z[] = {0}, two[] = {2}, zz[] = {0, 0}, tt[] = {2, 2}, dup[] = {1, -2};
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(3, 4, 5), sl_x), y;
    cge_tensor in[5] = {x, op_tensor(CGE_I64, CGE_SHAPE(1), z), op_tensor(CGE_I64, CGE_SHAPE(1), two),
                        op_absent(), op_tensor(CGE_I64, CGE_SHAPE(1), z)};
    assert_meta_error(op_run("Slice", in, 5, NULL, 0, &y, 1), "step for axis 0 is 0");
    in[1] = op_tensor(CGE_I64, CGE_SHAPE(2), zz);
    in[2] = op_tensor(CGE_I64, CGE_SHAPE(2), tt);
    in[3] = op_tensor(CGE_I64, CGE_SHAPE(2), dup);
    in[4] = op_absent();
    assert_meta_error(op_run("Slice", in, 5, NULL, 0, &y, 1), "listed twice");
    in[2] = op_tensor(CGE_I64, CGE_SHAPE(1), two);
    assert_meta_error(op_run("Slice", in, 5, NULL, 0, &y, 1), "'ends' has 1 entries");
}

static void test_slice_dynamic_meta(void **state)
{
    static const int64_t ax[] = {-2};
    cge_tensor_desc in[4] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(3, 4, 5)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(1)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(1)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(1)}};
    const void *vals[4] = {NULL, NULL, NULL, ax};
    cge_tensor_desc out = {0};
    assert_int_equal(op_infer("Slice", in, vals, 4, NULL, 0, &out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out.shape, &CGE_SHAPE(3, CGE_DIM_DYNAMIC, 5)));
    vals[3] = NULL;
    assert_int_equal(op_infer("Slice", in, vals, 4, NULL, 0, &out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out.shape, &CGE_SHAPE(CGE_DIM_DYNAMIC, CGE_DIM_DYNAMIC, CGE_DIM_DYNAMIC)));
}

/* ---- Gather ------------------------------------------------------------- */

static void test_gather_f32(void **state)
{
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(3, 4), ga_x), op_tensor(CGE_I64, CGE_SHAPE(2, 2), ga_idx0)};
    cge_tensor y;
    assert_int_equal(op_run("Gather", in, 2, NULL, 0, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2, 2, 4), ga_ax0);
    op_free_outputs(&y, 1);
    cge_attr ax = attr_int("axis", 1);
    in[1] = op_tensor(CGE_I32, CGE_SHAPE(3), ga_idx1);
    assert_int_equal(op_run("Gather", in, 2, &ax, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3, 3), ga_ax1);
    op_free_outputs(&y, 1);
    /* Rank-0 index: the axis disappears. */
    static const int64_t one = 1;
    ax = attr_int("axis", -1);
    in[1] = op_tensor(CGE_I64, CGE_SCALAR, &one);
    assert_int_equal(op_run("Gather", in, 2, &ax, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3), ga_scalar);
    op_free_outputs(&y, 1);
}

static void test_gather_dtypes(void **state)
{
    cge_tensor y;
    static const int64_t d64[] = {10, 20, 30, 40}, i64[] = {3, -4, 1}, w64[] = {40, 10, 20};
    cge_tensor in[2] = {op_tensor(CGE_I64, CGE_SHAPE(4), d64), op_tensor(CGE_I64, CGE_SHAPE(3), i64)};
    assert_int_equal(op_run("Gather", in, 2, NULL, 0, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(3), w64);
    op_free_outputs(&y, 1);

    static const uint8_t b[] = {1, 0, 1}, bw[] = {0, 1};
    static const int32_t bi[] = {1, 2};
    in[0] = op_tensor(CGE_BOOL, CGE_SHAPE(3), b);
    in[1] = op_tensor(CGE_I32, CGE_SHAPE(2, 1), bi);
    assert_int_equal(op_run("Gather", in, 2, NULL, 0, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(2, 1), bw);
    op_free_outputs(&y, 1);

    uint16_t h[6], hw[4];
    for (int i = 0; i < 6; i++)
        h[i] = cge_f32_to_f16((float)i - 2.5f);
    static const int64_t hi[] = {2, 0};
    hw[0] = h[2], hw[1] = h[0], hw[2] = h[5], hw[3] = h[3];
    cge_attr ax = attr_int("axis", 1);
    in[0] = op_tensor(CGE_F16, CGE_SHAPE(2, 3), h);
    in[1] = op_tensor(CGE_I64, CGE_SHAPE(2), hi);
    assert_int_equal(op_run("Gather", in, 2, &ax, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F16, CGE_SHAPE(2, 2), hw);
    op_free_outputs(&y, 1);

    static const double f[] = {1.5, 2.5, 3.5, 4.5, 5.5, 6.5}, fw[] = {5.5, 6.5};
    static const int64_t last = -1;
    in[0] = op_tensor(CGE_F64, CGE_SHAPE(3, 2), f);
    in[1] = op_tensor(CGE_I64, CGE_SHAPE(1), &last);
    assert_int_equal(op_run("Gather", in, 2, NULL, 0, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F64, CGE_SHAPE(1, 2), fw);
    op_free_outputs(&y, 1);
}

/* Whole rows of 40 bytes (memcpy path) and enough rows for several blocks. */
static void test_gather_rows_large(void **state)
{
    const int64_t V = 50, D = 10, N = 4000;
    float *table = arange(CGE_F32, V * D, 0);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)N);
    float *want = malloc(sizeof(float) * (size_t)(N * D));
    assert_non_null(idx);
    assert_non_null(want);
    for (int64_t j = 0; j < N; j++) {
        idx[j] = (j * 37) % V - (j % 3 == 0 ? V : 0);
        int64_t k = idx[j] < 0 ? idx[j] + V : idx[j];
        memcpy(want + j * D, table + k * D, sizeof(float) * (size_t)D);
    }
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(V, D), table), op_tensor(CGE_I64, CGE_SHAPE(N), idx)};
    cge_tensor y;
    assert_int_equal(op_run("Gather", in, 2, NULL, 0, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(N, D), want);
    op_free_outputs(&y, 1);
    free(want);
    free(idx);
    free(table);
}

static void test_gather_empty_indices(void **state)
{
    static const int64_t dummy = 0;
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(3, 4), ga_x), op_tensor(CGE_I64, CGE_SHAPE(0), &dummy)};
    cge_tensor y;
    assert_int_equal(op_run("Gather", in, 2, NULL, 0, &y, 1), CGE_OK);
    op_assert_shape(&y, CGE_SHAPE(0, 4));
    op_free_outputs(&y, 1);
}

static void test_gather_errors(void **state)
{
    static const int64_t bad[] = {0, 3}, neg[] = {-4};
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(3, 4), ga_x), op_tensor(CGE_I64, CGE_SHAPE(2), bad)};
    cge_tensor y;
    cge_status st = op_run("Gather", in, 2, NULL, 0, &y, 1);
    op_assert_error(st, "[kernel]", "'node0'");
    op_assert_error(st, "[kernel]", "index 3 (position 1) is out of range [-3, 3)");
    in[1] = op_tensor(CGE_I64, CGE_SHAPE(1), neg);
    op_assert_error(op_run("Gather", in, 2, NULL, 0, &y, 1), "[kernel]", "index -4");
    cge_attr ax = attr_int("axis", 2);
    in[1] = op_tensor(CGE_I64, CGE_SHAPE(1), bad);
    assert_meta_error(op_run("Gather", in, 2, &ax, 1, &y, 1), "axis 2 is out of range");
    in[0] = op_tensor(CGE_F32, CGE_SCALAR, ga_x);
    assert_meta_error(op_run("Gather", in, 2, NULL, 0, &y, 1), "rank >= 1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transpose_f32_perms),
        cmocka_unit_test(test_transpose_f16_nchw_to_nhwc),
        cmocka_unit_test(test_transpose_int64_bool),
        cmocka_unit_test(test_transpose_large_blocked),
        cmocka_unit_test(test_transpose_scalar_and_empty),
        cmocka_unit_test(test_transpose_errors),
        cmocka_unit_test(test_concat_f32_axes),
        cmocka_unit_test(test_concat_int64_and_empty),
        cmocka_unit_test(test_concat_f16_bool),
        cmocka_unit_test(test_concat_large),
        cmocka_unit_test(test_concat_many_inputs_direct),
        cmocka_unit_test(test_concat_errors),
        cmocka_unit_test(test_concat_dynamic_meta),
        cmocka_unit_test(test_split_with_sizes),
        cmocka_unit_test(test_split_equal),
        cmocka_unit_test(test_split_large_f16),
        cmocka_unit_test(test_split_errors),
        cmocka_unit_test(test_split_dynamic_meta),
        cmocka_unit_test(test_slice_cases_f32),
        cmocka_unit_test(test_slice_dtypes),
        cmocka_unit_test(test_slice_bool_and_empty_input),
        cmocka_unit_test(test_slice_errors),
        cmocka_unit_test(test_slice_dynamic_meta),
        cmocka_unit_test(test_gather_f32),
        cmocka_unit_test(test_gather_dtypes),
        cmocka_unit_test(test_gather_rows_large),
        cmocka_unit_test(test_gather_empty_indices),
        cmocka_unit_test(test_gather_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
