/* CastLike, MeanVarianceNormalization, Det, GridSample, MaxUnpool, RoiAlign,
 * NonMaxSuppression, Unique, TfIdfVectorizer: every ONNX 1.12 node case plus
 * numpy/PyTorch/torchvision-referenced ones (misc_fixtures.h); meta with and
 * without values for the data-dependent shapes and meta errors. The random
 * generators cannot match fixed data: their shapes, dtypes, seeds and
 * statistics are tested instead. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "misc_fixtures.h"

static void test_misc_node_cases(void **state)
{
    assert_true(NUM_MISC_CASES >= 100);
    nc_run_all(misc_cases, NUM_MISC_CASES);
}

static void test_castlike_meta(void **state)
{
    cge_tensor_desc in[2] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(2, 3)},
                             {.dtype = CGE_I8, .shape = CGE_SHAPE(1)}};
    cge_tensor_desc out[1];
    assert_int_equal(op_infer("CastLike", in, NULL, 2, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].dtype, CGE_I8);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(2, 3)));
    /* Cast's rules: float -> int8 truncates and saturates */
    float x[4] = {1.9f, -1.9f, 300.0f, -300.0f};
    int8_t like = 0, want[4] = {1, -1, 127, -128};
    cge_tensor t[2] = {op_tensor(CGE_F32, CGE_SHAPE(4), x), op_tensor(CGE_I8, CGE_SHAPE(1), &like)};
    cge_tensor o[1];
    assert_int_equal(op_run("CastLike", t, 2, NULL, 0, o, 1), CGE_OK);
    op_assert_equal(&o[0], CGE_I8, CGE_SHAPE(4), want);
    op_free_outputs(o, 1);
}

/* NonMaxSuppression's and Unique's output sizes come from the values: without
 * them meta gives a dynamic dim, with them the exact size. */
static void test_data_dependent_meta(void **state)
{
    float boxes[3 * 4] = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 10, 1, 11};
    float scores[3] = {0.9f, 0.8f, 0.7f};
    int64_t max_out = 10;
    float iou = 0.5f;
    cge_tensor_desc in[4] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(1, 3, 4)},
                             {.dtype = CGE_F32, .shape = CGE_SHAPE(1, 1, 3)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(1)},
                             {.dtype = CGE_F32, .shape = CGE_SHAPE(1)}};
    cge_tensor_desc out[4];
    assert_int_equal(op_infer("NonMaxSuppression", in, NULL, 4, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].shape.dims[0], CGE_DIM_DYNAMIC);
    assert_int_equal(out[0].shape.dims[1], 3);
    const void *vals[4] = {boxes, scores, &max_out, &iou};
    assert_int_equal(op_infer("NonMaxSuppression", in, vals, 4, NULL, 0, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(2, 3)));
    /* without max_output_boxes_per_class nothing is selected */
    assert_int_equal(op_infer("NonMaxSuppression", in, vals, 2, NULL, 0, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(0, 3)));
    in[0].shape = CGE_SHAPE(1, 3, 5);
    op_assert_error(op_infer("NonMaxSuppression", in, NULL, 4, NULL, 0, out, 1), "[meta]",
                    "boxes [B, S, 4]");

    int32_t u[6] = {3, 1, 3, 2, 1, 3};
    cge_tensor_desc ud = {.dtype = CGE_I32, .shape = CGE_SHAPE(2, 3)};
    assert_int_equal(op_infer("Unique", &ud, NULL, 1, NULL, 0, out, 4), CGE_OK);
    assert_int_equal(out[0].shape.dims[0], CGE_DIM_DYNAMIC);
    assert_true(cge_shape_equal(&out[2].shape, &CGE_SHAPE(6)));
    const void *uv[1] = {u};
    assert_int_equal(op_infer("Unique", &ud, uv, 1, NULL, 0, out, 4), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(3)));
    assert_true(cge_shape_equal(&out[3].shape, &CGE_SHAPE(3)));
    cge_attr ax = CGE_ATTR_I("axis", 1);
    assert_int_equal(op_infer("Unique", &ud, uv, 1, &ax, 1, out, 4), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(2, 3))); /* columns all differ */
    ax.i = 2;
    op_assert_error(op_infer("Unique", &ud, NULL, 1, &ax, 1, out, 4), "[meta]", "axis");

    /* Unique with only some outputs present */
    cge_tensor t[1] = {op_tensor(CGE_I32, CGE_SHAPE(2, 3), u)};
    cge_tensor o[2];
    int32_t want_y[3] = {3, 1, 2};
    int64_t want_idx[3] = {0, 1, 3};
    cge_attr unsorted = CGE_ATTR_I("sorted", 0);
    assert_int_equal(op_run("Unique", t, 1, &unsorted, 1, o, 2), CGE_OK);
    op_assert_equal(&o[0], CGE_I32, CGE_SHAPE(3), want_y);
    op_assert_equal(&o[1], CGE_I64, CGE_SHAPE(3), want_idx);
    op_free_outputs(o, 2);
}

static void test_misc_meta_errors(void **state)
{
    cge_tensor_desc out[1];
    cge_tensor_desc x5 = {.dtype = CGE_F32, .shape = CGE_SHAPE(1, 1, 2, 2, 2)};
    cge_tensor_desc g5 = {.dtype = CGE_F32, .shape = CGE_SHAPE(1, 2, 2, 2, 3)};
    cge_tensor_desc gs[2] = {x5, g5};
    op_assert_error(op_infer("GridSample", gs, NULL, 2, NULL, 0, out, 1), "[meta]", "2-D");
    gs[0].shape = CGE_SHAPE(1, 1, 4, 4);
    gs[1].shape = CGE_SHAPE(1, 3, 3, 2);
    cge_attr mode = CGE_ATTR_S("mode", "cubic");
    op_assert_error(op_infer("GridSample", gs, NULL, 2, &mode, 1, out, 1), "[meta]", "mode");
    assert_int_equal(op_infer("GridSample", gs, NULL, 2, NULL, 0, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(1, 1, 3, 3)));

    cge_tensor_desc tf = {.dtype = CGE_I64, .shape = CGE_SHAPE(2, 6)};
    int64_t counts[1] = {0}, idx[2] = {0, 1}, pool[2] = {4, 7};
    const char *strs[2] = {"a", "b"};
    cge_attr ta[7] = {CGE_ATTR_S("mode", "TF"), CGE_ATTR_I("min_gram_length", 1),
                      CGE_ATTR_I("max_gram_length", 1), CGE_ATTR_I("max_skip_count", 0),
                      CGE_ATTR_INTS("ngram_counts", counts, 1),
                      CGE_ATTR_INTS("ngram_indexes", idx, 2),
                      CGE_ATTR_INTS("pool_int64s", pool, 2)};
    assert_int_equal(op_infer("TfIdfVectorizer", &tf, NULL, 1, ta, 7, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(2, 2)));
    assert_int_equal(out[0].dtype, CGE_F32);
    ta[6] = (cge_attr){.name = "pool_strings", .kind = CGE_ATTR_STRINGS, .n = 2, .strings = strs};
    op_assert_error(op_infer("TfIdfVectorizer", &tf, NULL, 1, ta, 7, out, 1), "[meta]",
                    "string");
    ta[6] = CGE_ATTR_INTS("pool_int64s", pool, 1);
    op_assert_error(op_infer("TfIdfVectorizer", &tf, NULL, 1, ta, 7, out, 1), "[meta]",
                    "n-grams");

    cge_tensor_desc det = {.dtype = CGE_F32, .shape = CGE_SHAPE(2, 3, 4)};
    op_assert_error(op_infer("Det", &det, NULL, 1, NULL, 0, out, 1), "[meta]", "square");
    det.dtype = CGE_I32;
    det.shape = CGE_SHAPE(3, 3);
    op_assert_error(op_infer("Det", &det, NULL, 1, NULL, 0, out, 1), "[meta]", "float");

    cge_tensor_desc mvn = {.dtype = CGE_F32, .shape = CGE_SHAPE(2, 3)};
    op_assert_error(op_infer("MeanVarianceNormalization", &mvn, NULL, 1, NULL, 0, out, 1),
                    "[meta]", "axes");

    cge_tensor_desc up[3] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(1, 1, 2, 2)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(1, 1, 2, 2)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(4)}};
    int64_t ks[2] = {2, 2};
    cge_attr k = CGE_ATTR_INTS("kernel_shape", ks, 2);
    assert_int_equal(op_infer("MaxUnpool", up, NULL, 3, &k, 1, out, 1), CGE_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(out[0].shape.dims[i], CGE_DIM_DYNAMIC); /* output_shape unknown */
    assert_int_equal(op_infer("MaxUnpool", up, NULL, 2, &k, 1, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(1, 1, 3, 3)));
    k.n = 1;
    op_assert_error(op_infer("MaxUnpool", up, NULL, 2, &k, 1, out, 1), "[meta]", "kernel_shape");

    cge_tensor_desc roi[3] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(1, 2, 4, 4)},
                              {.dtype = CGE_F32, .shape = CGE_SHAPE(3, 4)},
                              {.dtype = CGE_I64, .shape = CGE_SHAPE(2)}};
    op_assert_error(op_infer("RoiAlign", roi, NULL, 3, NULL, 0, out, 1), "[meta]", "rois");
}

static void test_misc_kernel_errors(void **state)
{
    float x[4] = {1, 2, 3, 4};
    int64_t ind[4] = {0, 5, 16, 3};
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(1, 1, 2, 2), x),
                        op_tensor(CGE_I64, CGE_SHAPE(1, 1, 2, 2), ind)};
    int64_t ks[2] = {2, 2};
    cge_attr at[2] = {CGE_ATTR_INTS("kernel_shape", ks, 2), CGE_ATTR_INTS("strides", ks, 2)};
    cge_tensor out[1];
    op_assert_error(op_run("MaxUnpool", in, 2, at, 2, out, 1), "[kernel]", "index 16");

    float fm[16] = {0};
    float rois[4] = {0, 0, 2, 2};
    int64_t bi[1] = {3};
    cge_tensor r[3] = {op_tensor(CGE_F32, CGE_SHAPE(1, 1, 4, 4), fm),
                       op_tensor(CGE_F32, CGE_SHAPE(1, 4), rois),
                       op_tensor(CGE_I64, CGE_SHAPE(1), bi)};
    op_assert_error(op_run("RoiAlign", r, 3, NULL, 0, out, 1), "[kernel]", "batch index 3");
}

/* RoiAlign's max mode takes, over all samples of a bin, the largest weighted
 * corner (ONNX Runtime's definition). On a constant map with one sample at a
 * pixel centre that is the value itself. */
static void test_roialign_max(void **state)
{
    float fm[16];
    for (int i = 0; i < 16; i++)
        fm[i] = (float)i;
    float rois[4] = {1, 1, 3, 3};
    int64_t bi[1] = {0};
    cge_tensor r[3] = {op_tensor(CGE_F32, CGE_SHAPE(1, 1, 4, 4), fm),
                       op_tensor(CGE_F32, CGE_SHAPE(1, 4), rois),
                       op_tensor(CGE_I64, CGE_SHAPE(1), bi)};
    cge_attr at[5] = {CGE_ATTR_S("mode", "max"), CGE_ATTR_I("output_height", 2),
                      CGE_ATTR_I("output_width", 2), CGE_ATTR_I("sampling_ratio", 1),
                      CGE_ATTR_S("coordinate_transformation_mode", "output_half_pixel")};
    cge_tensor out[1];
    assert_int_equal(op_run("RoiAlign", r, 3, at, 5, out, 1), CGE_OK);
    /* bins of 1x1 pixel sampled at (1.5, 1.5), (1.5, 2.5), ...: the largest of
     * the four weighted corners, each weight 1/4 */
    float want[4] = {10 * 0.25f, 11 * 0.25f, 14 * 0.25f, 15 * 0.25f};
    op_assert_close(&out[0], CGE_F32, CGE_SHAPE(1, 1, 2, 2), want, 1e-6, 1e-6);
    op_free_outputs(out, 1);
    at[0] = CGE_ATTR_S("mode", "avg");
    assert_int_equal(op_run("RoiAlign", r, 3, at, 5, out, 1), CGE_OK);
    float avg[4] = {7.5f, 8.5f, 11.5f, 12.5f};
    op_assert_close(&out[0], CGE_F32, CGE_SHAPE(1, 1, 2, 2), avg, 1e-6, 1e-6);
    op_free_outputs(out, 1);
}

/* ---- random generators --------------------------------------------------------------- */

enum { RN = 200000 };

static void stats(const cge_tensor *t, double *mean, double *var, double *lo, double *hi)
{
    int64_t n = cge_shape_numel(&t->shape);
    double s = 0, s2 = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double v = cge__load_as_double(t->dtype, t->data, i);
        s += v;
        s2 += v * v;
        *lo = v < *lo ? v : *lo;
        *hi = v > *hi ? v : *hi;
    }
    *mean = s / (double)n;
    *var = s2 / (double)n - *mean * *mean;
}

static void test_random_uniform_like(void **state)
{
    float *like = calloc(RN, sizeof(float));
    assert_non_null(like);
    cge_tensor in[1] = {op_tensor(CGE_F32, CGE_SHAPE(RN / 100, 100), like)};
    cge_attr at[4] = {CGE_ATTR_F("low", -2.0f), CGE_ATTR_F("high", 4.0f), CGE_ATTR_F("seed", 3.0f),
                      CGE_ATTR_I("dtype", CGE_F64)};
    cge_tensor a[1], b[1], c[1];
    assert_int_equal(op_run("RandomUniformLike", in, 1, at, 4, a, 1), CGE_OK);
    assert_int_equal(a[0].dtype, CGE_F64);
    assert_true(cge_shape_equal(&a[0].shape, &CGE_SHAPE(RN / 100, 100)));
    double m, v, lo, hi;
    stats(&a[0], &m, &v, &lo, &hi);
    /* U(-2, 4): mean 1, variance 3; 200k samples put the mean within ~0.004 */
    assert_true(fabs(m - 1.0) < 0.02);
    assert_true(fabs(v - 3.0) < 0.05);
    assert_true(lo >= -2.0 && lo < -1.99);
    assert_true(hi < 4.0 && hi > 3.99);
    /* the same seed gives the same values; another seed others */
    assert_int_equal(op_run("RandomUniformLike", in, 1, at, 4, b, 1), CGE_OK);
    assert_memory_equal(a[0].data, b[0].data, a[0].bytes);
    at[2].f = 4.0f;
    assert_int_equal(op_run("RandomUniformLike", in, 1, at, 4, c, 1), CGE_OK);
    assert_memory_not_equal(a[0].data, c[0].data, a[0].bytes);
    op_free_outputs(b, 1);
    op_free_outputs(c, 1);
    /* without a seed two runs differ */
    assert_int_equal(op_run("RandomUniformLike", in, 1, at, 2, b, 1), CGE_OK);
    assert_int_equal(op_run("RandomUniformLike", in, 1, at, 2, c, 1), CGE_OK);
    assert_int_equal(b[0].dtype, CGE_F32); /* the input's dtype */
    assert_memory_not_equal(b[0].data, c[0].data, b[0].bytes);
    op_free_outputs(a, 1);
    op_free_outputs(b, 1);
    op_free_outputs(c, 1);
    /* an int input needs a float dtype attribute */
    int32_t iv[2] = {0, 0};
    cge_tensor ii[1] = {op_tensor(CGE_I32, CGE_SHAPE(2), iv)};
    op_assert_error(op_run("RandomUniformLike", ii, 1, NULL, 0, a, 1), "[meta]", "float");
    free(like);
}

static void test_random_normal_like(void **state)
{
    uint16_t *like = calloc(RN, sizeof(uint16_t));
    assert_non_null(like);
    cge_tensor in[1] = {op_tensor(CGE_F16, CGE_SHAPE(RN), like)};
    cge_attr at[3] = {CGE_ATTR_F("mean", 5.0f), CGE_ATTR_F("scale", 2.0f),
                      CGE_ATTR_I("dtype", CGE_F32)};
    cge_tensor a[1];
    assert_int_equal(op_run("RandomNormalLike", in, 1, at, 3, a, 1), CGE_OK);
    assert_int_equal(a[0].dtype, CGE_F32);
    double m, v, lo, hi;
    stats(&a[0], &m, &v, &lo, &hi);
    assert_true(fabs(m - 5.0) < 0.03);
    assert_true(fabs(v - 4.0) < 0.08);
    /* about 0.27% of normal samples lie beyond 3 sigma */
    int64_t beyond = 0;
    for (int i = 0; i < RN; i++)
        beyond += fabsf(((float *)a[0].data)[i] - 5.0f) > 6.0f;
    assert_true(beyond > RN / 1000 && beyond < RN / 200);
    op_free_outputs(a, 1);
    free(like);
}

static void test_bernoulli(void **state)
{
    double *p = malloc(sizeof(double) * RN);
    assert_non_null(p);
    for (int i = 0; i < RN; i++)
        p[i] = i < RN / 2 ? 0.3 : (i % 2 ? 0.0 : 1.0);
    cge_tensor in[1] = {op_tensor(CGE_F64, CGE_SHAPE(RN), p)};
    cge_attr at[2] = {CGE_ATTR_I("dtype", CGE_BOOL), CGE_ATTR_F("seed", 1.0f)};
    cge_tensor a[1];
    assert_int_equal(op_run("Bernoulli", in, 1, at, 2, a, 1), CGE_OK);
    assert_int_equal(a[0].dtype, CGE_BOOL);
    const uint8_t *y = a[0].data;
    int64_t ones = 0;
    for (int i = 0; i < RN / 2; i++)
        ones += y[i];
    assert_true(fabs((double)ones / (RN / 2) - 0.3) < 0.01);
    for (int i = RN / 2; i < RN; i++)
        assert_int_equal(y[i], i % 2 ? 0 : 1); /* p = 0 and p = 1 are certain */
    op_free_outputs(a, 1);
    assert_int_equal(op_run("Bernoulli", in, 1, NULL, 0, a, 1), CGE_OK);
    assert_int_equal(a[0].dtype, CGE_F64);
    op_free_outputs(a, 1);
    free(p);
}

static void test_multinomial(void **state)
{
    /* row 0: probabilities 0.1, 0.2, 0.7; row 1: class 2 only */
    float x[6] = {logf(0.1f), logf(0.2f), logf(0.7f), -INFINITY, -INFINITY, 0.0f};
    cge_tensor in[1] = {op_tensor(CGE_F32, CGE_SHAPE(2, 3), x)};
    cge_attr at[3] = {CGE_ATTR_I("sample_size", 50000), CGE_ATTR_I("dtype", CGE_I64),
                      CGE_ATTR_F("seed", 9.0f)};
    cge_tensor a[1];
    assert_int_equal(op_run("Multinomial", in, 1, at, 3, a, 1), CGE_OK);
    assert_int_equal(a[0].dtype, CGE_I64);
    assert_true(cge_shape_equal(&a[0].shape, &CGE_SHAPE(2, 50000)));
    const int64_t *y = a[0].data;
    int64_t n[3] = {0, 0, 0};
    for (int i = 0; i < 50000; i++) {
        assert_true(y[i] >= 0 && y[i] < 3);
        n[y[i]]++;
        assert_int_equal(y[50000 + i], 2);
    }
    assert_true(fabs(n[0] / 50000.0 - 0.1) < 0.01);
    assert_true(fabs(n[1] / 50000.0 - 0.2) < 0.01);
    assert_true(fabs(n[2] / 50000.0 - 0.7) < 0.01);
    op_free_outputs(a, 1);
    assert_int_equal(op_run("Multinomial", in, 1, NULL, 0, a, 1), CGE_OK);
    assert_int_equal(a[0].dtype, CGE_I32); /* default dtype, one sample */
    assert_true(cge_shape_equal(&a[0].shape, &CGE_SHAPE(2, 1)));
    op_free_outputs(a, 1);
    cge_attr bad = CGE_ATTR_I("dtype", CGE_F32);
    op_assert_error(op_run("Multinomial", in, 1, &bad, 1, a, 1), "[meta]", "dtype");
}

/* RandomUniform and RandomNormal: generators with no inputs. */
static void test_random_generators(void **state)
{
    (void)state;
    int64_t shape[2] = {400, 500};
    cge_attr ua[4] = {CGE_ATTR_INTS("shape", shape, 2), CGE_ATTR_F("low", 1.0f),
                      CGE_ATTR_F("high", 2.0f), CGE_ATTR_F("seed", 5.0f)};
    cge_tensor a[1], b[1];
    assert_int_equal(op_run("RandomUniform", NULL, 0, ua, 4, a, 1), CGE_OK);
    assert_int_equal(a[0].dtype, CGE_F32);
    assert_true(cge_shape_equal(&a[0].shape, &CGE_SHAPE(400, 500)));
    double m, v, lo, hi;
    stats(&a[0], &m, &v, &lo, &hi);
    assert_true(fabs(m - 1.5) < 0.01 && fabs(v - 1.0 / 12) < 0.005 && lo >= 1.0 && hi < 2.0);
    assert_int_equal(op_run("RandomUniform", NULL, 0, ua, 4, b, 1), CGE_OK);
    assert_memory_equal(a[0].data, b[0].data, a[0].bytes);
    op_free_outputs(a, 1);
    op_free_outputs(b, 1);
    cge_attr na[3] = {CGE_ATTR_INTS("shape", shape, 2), CGE_ATTR_F("scale", 3.0f),
                      CGE_ATTR_I("dtype", CGE_F64)};
    assert_int_equal(op_run("RandomNormal", NULL, 0, na, 3, a, 1), CGE_OK);
    assert_int_equal(a[0].dtype, CGE_F64);
    stats(&a[0], &m, &v, &lo, &hi);
    assert_true(fabs(m) < 0.03 && fabs(v - 9.0) < 0.15);
    assert_int_equal(op_run("RandomNormal", NULL, 0, na, 3, b, 1), CGE_OK);
    assert_memory_not_equal(a[0].data, b[0].data, a[0].bytes); /* no seed */
    op_free_outputs(a, 1);
    op_free_outputs(b, 1);
    cge_attr bad[2] = {CGE_ATTR_INTS("shape", shape, 2), CGE_ATTR_I("dtype", CGE_I32)};
    op_assert_error(op_run("RandomNormal", NULL, 0, bad, 2, a, 1), "[meta]", "float");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_misc_node_cases),
        cmocka_unit_test(test_castlike_meta),
        cmocka_unit_test(test_data_dependent_meta),
        cmocka_unit_test(test_misc_meta_errors),
        cmocka_unit_test(test_misc_kernel_errors),
        cmocka_unit_test(test_roialign_max),
        cmocka_unit_test(test_random_uniform_like),
        cmocka_unit_test(test_random_normal_like),
        cmocka_unit_test(test_bernoulli),
        cmocka_unit_test(test_multinomial),
        cmocka_unit_test(test_random_generators),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
