/* Tests of the shape family (src/ops/shape.c): Reshape, Flatten, Squeeze,
 * Unsqueeze, Expand (numpy references in shape_fixtures.h, from
 * gen_shape_fixtures.py), Shape and Constant; values, dtypes, meta errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "op_runner.h"
#include "shape_fixtures.h"

#define DYN CGE_DIM_DYNAMIC

static cge_attr attr_int(const char *name, int64_t v)
{
    return (cge_attr){.name = name, .kind = CGE_ATTR_INT, .i = v};
}

static void assert_meta_error(cge_status st, const char *needle)
{
    op_assert_error(st, "[meta]", "'node0'");
    op_assert_error(st, "[meta]", needle);
}

static void assert_desc_shape(const cge_tensor_desc *d, cge_shape want)
{
    if (!cge_shape_equal(&d->shape, &want)) {
        char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
        fail_msg("inferred %s, expected %s", cge_shape_str(&d->shape, a, sizeof a),
                 cge_shape_str(&want, b, sizeof b));
    }
}

static float x24[24];

static int setup_x24(void **state)
{
    for (int i = 0; i < 24; i++)
        x24[i] = (float)i * 0.5f - 3.0f;
    return 0;
}

/* One run of a two-input op whose second input is an int64 list. */
static cge_status run_with_list(const char *op, cge_tensor x, const int64_t *list, int64_t n,
                                const cge_attr *attrs, int32_t num_attrs, cge_tensor *y)
{
    static const int64_t none = 0;
    cge_tensor in[2] = {x, op_tensor(CGE_I64, CGE_SHAPE(n), list ? list : &none)};
    return op_run(op, in, 2, attrs, num_attrs, y, 1);
}

/* ---- Reshape ------------------------------------------------------------ */

static void check_reshape(const int64_t *shape, int64_t n, cge_shape want)
{
    cge_tensor y;
    assert_int_equal(run_with_list("Reshape", op_tensor(CGE_F32, CGE_SHAPE(2, 3, 4), x24), shape, n, NULL, 0, &y),
                     CGE_OK);
    op_assert_equal(&y, CGE_F32, want, x24);
    op_free_outputs(&y, 1);
}

static void test_reshape_f32(void **state)
{
    static const int64_t s1[] = {4, -1}, s2[] = {0, -1}, s3[] = {0, 0, -1}, s4[] = {24}, s5[] = {-1},
                         s6[] = {2, 1, 3, 1, 4};
    check_reshape(s1, 2, CGE_SHAPE(4, 6));
    check_reshape(s2, 2, CGE_SHAPE(2, 12));
    check_reshape(s3, 3, CGE_SHAPE(2, 3, 4));
    check_reshape(s4, 1, CGE_SHAPE(24));
    check_reshape(s5, 1, CGE_SHAPE(24));
    check_reshape(s6, 5, CGE_SHAPE(2, 1, 3, 1, 4));
}

static void test_reshape_dtypes_and_scalars(void **state)
{
    static const int64_t s23[] = {2, 3}, s11[] = {1, 1}, i6[] = {1, -2, 3, -4, 5, -6};
    static const uint8_t b6[] = {1, 0, 0, 1, 1, 1};
    static const double d6[] = {0.5, 1.5, -2.5, 3.5, 4.5, -5.5};
    uint16_t h6[6];
    for (int i = 0; i < 6; i++)
        h6[i] = cge_f32_to_f16((float)i - 1.25f);
    cge_tensor y;
    assert_int_equal(run_with_list("Reshape", op_tensor(CGE_I64, CGE_SHAPE(6), i6), s23, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(2, 3), i6);
    op_free_outputs(&y, 1);
    assert_int_equal(run_with_list("Reshape", op_tensor(CGE_BOOL, CGE_SHAPE(6), b6), s23, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(2, 3), b6);
    op_free_outputs(&y, 1);
    assert_int_equal(run_with_list("Reshape", op_tensor(CGE_F16, CGE_SHAPE(3, 2), h6), s23, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F16, CGE_SHAPE(2, 3), h6);
    op_free_outputs(&y, 1);
    assert_int_equal(run_with_list("Reshape", op_tensor(CGE_F64, CGE_SHAPE(6, 1), d6), s23, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F64, CGE_SHAPE(2, 3), d6);
    op_free_outputs(&y, 1);
    /* Scalar <-> [1,1]; an empty 'shape' makes a scalar. */
    static const float v = 7.25f;
    assert_int_equal(run_with_list("Reshape", op_tensor(CGE_F32, CGE_SCALAR, &v), s11, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(1, 1), &v);
    op_free_outputs(&y, 1);
    assert_int_equal(run_with_list("Reshape", op_tensor(CGE_F32, CGE_SHAPE(1, 1), &v), NULL, 0, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SCALAR, &v);
    op_free_outputs(&y, 1);
}

static void test_reshape_allowzero(void **state)
{
    static const int64_t s30[] = {3, 0}, s03[] = {0, 3};
    static const float dummy = 0;
    cge_tensor y;
    cge_attr az = attr_int("allowzero", 1);
    assert_int_equal(run_with_list("Reshape", op_tensor(CGE_F32, CGE_SHAPE(0, 3), &dummy), s30, 2, &az, 1, &y),
                     CGE_OK);
    op_assert_shape(&y, CGE_SHAPE(3, 0));
    op_free_outputs(&y, 1);
    /* Without allowzero the 0 copies the input's dim. */
    assert_int_equal(run_with_list("Reshape", op_tensor(CGE_F32, CGE_SHAPE(2, 3), x24), s03, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2, 3), x24);
    op_free_outputs(&y, 1);
    /* With it, [0,3] does not hold 6 elements. */
    assert_meta_error(run_with_list("Reshape", op_tensor(CGE_F32, CGE_SHAPE(2, 3), x24), s03, 2, &az, 1, &y),
                      "(6 elements) to [0,3] (0 elements)");
}

static void test_reshape_errors(void **state)
{
    static const int64_t two_neg[] = {-1, -1}, s55[] = {5, 5}, zeros[] = {0, 0, 0, 0}, s5n[] = {5, -1},
                         bad[] = {-2, 12}, zn[] = {0, -1};
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(2, 3, 4), x24), y;
    assert_meta_error(run_with_list("Reshape", x, two_neg, 2, NULL, 0, &y), "more than one -1");
    assert_meta_error(run_with_list("Reshape", x, s55, 2, NULL, 0, &y),
                      "cannot reshape input [2,3,4] (24 elements) to [5,5] (25 elements)");
    assert_meta_error(run_with_list("Reshape", x, zeros, 4, NULL, 0, &y), "the input has rank 3");
    assert_meta_error(run_with_list("Reshape", x, s5n, 2, NULL, 0, &y), "multiply to 5");
    assert_meta_error(run_with_list("Reshape", x, bad, 2, NULL, 0, &y), "entry 0 is -2");
    cge_attr az = attr_int("allowzero", 1);
    assert_meta_error(run_with_list("Reshape", x, zn, 2, &az, 1, &y), "both 0 and -1");
}

static void test_reshape_dynamic_meta(void **state)
{
    static const int64_t s0n[] = {0, -1}, s012[] = {0, 12};
    cge_tensor_desc in[2] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(DYN, 3, 4)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(2)}};
    const void *vals[2] = {NULL, NULL};
    cge_tensor_desc out = {0};
    assert_int_equal(op_infer("Reshape", in, vals, 2, NULL, 0, &out, 1), CGE_OK);
    assert_desc_shape(&out, CGE_SHAPE(DYN, DYN));
    vals[1] = s0n;
    assert_int_equal(op_infer("Reshape", in, vals, 2, NULL, 0, &out, 1), CGE_OK);
    assert_desc_shape(&out, CGE_SHAPE(DYN, DYN));
    vals[1] = s012;
    assert_int_equal(op_infer("Reshape", in, vals, 2, NULL, 0, &out, 1), CGE_OK);
    assert_desc_shape(&out, CGE_SHAPE(DYN, 12));
    assert_int_equal(out.dtype, CGE_F32);
    /* Without even the length of 'shape', the rank is unknown: said so. */
    in[1].shape = CGE_SHAPE(DYN);
    vals[1] = NULL;
    assert_meta_error(op_infer("Reshape", in, vals, 2, NULL, 0, &out, 1), "length of input 'shape' is unknown");
}

/* ---- Flatten ------------------------------------------------------------ */

static void test_flatten(void **state)
{
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(2, 3, 4), x24), y;
    static const struct { int64_t axis; int64_t a, b; } cases[] = {{1, 2, 12}, {0, 1, 24}, {-1, 6, 4}, {3, 24, 1}, {-3, 1, 24}};
    for (int i = 0; i < 5; i++) {
        cge_attr ax = attr_int("axis", cases[i].axis);
        assert_int_equal(op_run("Flatten", &x, 1, &ax, 1, &y, 1), CGE_OK);
        op_assert_equal(&y, CGE_F32, CGE_SHAPE(cases[i].a, cases[i].b), x24);
        op_free_outputs(&y, 1);
    }
    /* default axis 1, int64 */
    static const int64_t i6[] = {1, 2, 3, 4, 5, 6};
    cge_tensor xi = op_tensor(CGE_I64, CGE_SHAPE(3, 1, 2), i6);
    assert_int_equal(op_run("Flatten", &xi, 1, NULL, 0, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(3, 2), i6);
    op_free_outputs(&y, 1);
    /* a scalar with axis 0 is [1,1] */
    cge_attr a0 = attr_int("axis", 0);
    cge_tensor s = op_tensor(CGE_F32, CGE_SCALAR, x24);
    assert_int_equal(op_run("Flatten", &s, 1, &a0, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(1, 1), x24);
    op_free_outputs(&y, 1);
}

static void test_flatten_errors_and_dynamic(void **state)
{
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(2, 3, 4), x24), y;
    cge_attr ax = attr_int("axis", 4);
    assert_meta_error(op_run("Flatten", &x, 1, &ax, 1, &y, 1), "axis 4 is out of range for rank 3");
    ax = attr_int("axis", -4);
    assert_meta_error(op_run("Flatten", &x, 1, &ax, 1, &y, 1), "axis -4 is out of range");
    cge_tensor_desc in = {.dtype = CGE_F32, .shape = CGE_SHAPE(DYN, 3, 4)}, out = {0};
    assert_int_equal(op_infer("Flatten", &in, NULL, 1, NULL, 0, &out, 1), CGE_OK);
    assert_desc_shape(&out, CGE_SHAPE(DYN, 12));
}

/* ---- Squeeze / Unsqueeze ------------------------------------------------ */

static void test_squeeze(void **state)
{
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(1, 3, 1, 2), x24), y;
    assert_int_equal(op_run("Squeeze", &x, 1, NULL, 0, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3, 2), x24);
    op_free_outputs(&y, 1);
    static const int64_t m2[] = {-2}, a02[] = {2, 0};
    assert_int_equal(run_with_list("Squeeze", x, m2, 1, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(1, 3, 2), x24);
    op_free_outputs(&y, 1);
    static const uint8_t u[] = {9, 8, 7, 6, 5, 4};
    assert_int_equal(run_with_list("Squeeze", op_tensor(CGE_U8, CGE_SHAPE(1, 3, 1, 2), u), a02, 2, NULL, 0, &y),
                     CGE_OK);
    op_assert_equal(&y, CGE_U8, CGE_SHAPE(3, 2), u);
    op_free_outputs(&y, 1);
    /* [1] -> scalar */
    cge_tensor one = op_tensor(CGE_F32, CGE_SHAPE(1), x24);
    assert_int_equal(op_run("Squeeze", &one, 1, NULL, 0, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SCALAR, x24);
    op_free_outputs(&y, 1);
}

static void test_squeeze_errors_and_dynamic(void **state)
{
    static const int64_t a1[] = {1}, dup[] = {0, -4}, a4[] = {4};
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(1, 3, 1, 2), x24), y;
    assert_meta_error(run_with_list("Squeeze", x, a1, 1, NULL, 0, &y), "cannot squeeze axis 1 of size 3");
    assert_meta_error(run_with_list("Squeeze", x, dup, 2, NULL, 0, &y), "given twice");
    assert_meta_error(run_with_list("Squeeze", x, a4, 1, NULL, 0, &y), "axis 4 is out of range");
    cge_tensor_desc in[2] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(1, 3, 1, 2)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(2)}}, out = {0};
    const void *vals[2] = {NULL, NULL};
    /* Unknown axes, but exactly two dims are 1: the result is known. */
    assert_int_equal(op_infer("Squeeze", in, vals, 2, NULL, 0, &out, 1), CGE_OK);
    assert_desc_shape(&out, CGE_SHAPE(3, 2));
    in[1].shape = CGE_SHAPE(1);
    assert_int_equal(op_infer("Squeeze", in, vals, 2, NULL, 0, &out, 1), CGE_OK);
    assert_desc_shape(&out, CGE_SHAPE(DYN, DYN, DYN));
}

static void test_unsqueeze(void **state)
{
    static const int64_t a0m1[] = {0, -1}, a1[] = {1}, a0[] = {0};
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(3, 4), x24), y;
    assert_int_equal(run_with_list("Unsqueeze", x, a0m1, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(1, 3, 4, 1), x24);
    op_free_outputs(&y, 1);
    uint16_t h[12];
    for (int i = 0; i < 12; i++)
        h[i] = cge_f32_to_f16((float)i / 3.0f);
    assert_int_equal(run_with_list("Unsqueeze", op_tensor(CGE_F16, CGE_SHAPE(3, 4), h), a1, 1, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F16, CGE_SHAPE(3, 1, 4), h);
    op_free_outputs(&y, 1);
    static const int32_t s = -17;
    assert_int_equal(run_with_list("Unsqueeze", op_tensor(CGE_I32, CGE_SCALAR, &s), a0, 1, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_I32, CGE_SHAPE(1), &s);
    op_free_outputs(&y, 1);
}

static void test_unsqueeze_errors_and_dynamic(void **state)
{
    static const int64_t dup[] = {0, -4}, a5[] = {4}, many[] = {0, 1, 2, 3, 4, 5, 6};
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(3, 4), x24), y;
    assert_meta_error(run_with_list("Unsqueeze", x, dup, 2, NULL, 0, &y), "given twice");
    assert_meta_error(run_with_list("Unsqueeze", x, a5, 1, NULL, 0, &y), "axis 4 is out of range for output rank 3");
    assert_meta_error(run_with_list("Unsqueeze", x, many, 7, NULL, 0, &y), "output rank 9 exceeds 8");
    cge_tensor_desc in[2] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(3, 4)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(2)}}, out = {0};
    assert_int_equal(op_infer("Unsqueeze", in, NULL, 2, NULL, 0, &out, 1), CGE_OK);
    assert_desc_shape(&out, CGE_SHAPE(DYN, DYN, DYN, DYN));
}

/* ---- Expand ------------------------------------------------------------- */

static void test_expand_fixtures(void **state)
{
    static const int64_t s214[] = {2, 1, 4}, s11[] = {1, 1}, s31[] = {3, 1}, s241[] = {2, 4, 1},
                         s23[] = {2, 3}, s25[] = {2, 5};
    cge_tensor y;
    assert_int_equal(run_with_list("Expand", op_tensor(CGE_F32, CGE_SHAPE(3, 1), ex_x31), s214, 3, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2, 3, 4), ex_x31_to_214);
    op_free_outputs(&y, 1);
    assert_int_equal(run_with_list("Expand", op_tensor(CGE_F32, CGE_SHAPE(2, 3), ex_x23), s11, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(2, 3), ex_x23_to_11);
    op_free_outputs(&y, 1);
    assert_int_equal(run_with_list("Expand", op_tensor(CGE_F32, CGE_SHAPE(1, 4), ex_x14), s31, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3, 4), ex_x14_to_31);
    op_free_outputs(&y, 1);
    assert_int_equal(run_with_list("Expand", op_tensor(CGE_I64, CGE_SHAPE(2, 1, 3), ex_i213), s241, 3, NULL, 0, &y),
                     CGE_OK);
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(2, 4, 3), ex_i213_to_241);
    op_free_outputs(&y, 1);
    assert_int_equal(run_with_list("Expand", op_tensor(CGE_BOOL, CGE_SHAPE(3), ex_b3), s23, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_BOOL, CGE_SHAPE(2, 3), ex_b3_to_23);
    op_free_outputs(&y, 1);
    assert_int_equal(run_with_list("Expand", op_tensor(CGE_F64, CGE_SHAPE(2, 1), ex_d21), s25, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F64, CGE_SHAPE(2, 5), ex_d21_to_25);
    op_free_outputs(&y, 1);
}

static void test_expand_scalar_empty_large(void **state)
{
    static const int64_t s22[] = {2, 2}, s03[] = {0, 3}, big[] = {500, 300};
    uint16_t h = cge_f32_to_bf16(-3.5f), hw[4] = {h, h, h, h};
    cge_tensor y;
    assert_int_equal(run_with_list("Expand", op_tensor(CGE_BF16, CGE_SCALAR, &h), s22, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_BF16, CGE_SHAPE(2, 2), hw);
    op_free_outputs(&y, 1);
    assert_int_equal(run_with_list("Expand", op_tensor(CGE_F32, CGE_SHAPE(1, 3), x24), s03, 2, NULL, 0, &y), CGE_OK);
    op_assert_shape(&y, CGE_SHAPE(0, 3));
    op_free_outputs(&y, 1);
    float *row = malloc(300 * sizeof(float)), *want = malloc(500 * 300 * sizeof(float));
    assert_non_null(row);
    assert_non_null(want);
    for (int j = 0; j < 300; j++)
        row[j] = (float)j * 1.5f;
    for (int i = 0; i < 500; i++)
        memcpy(want + i * 300, row, 300 * sizeof(float));
    assert_int_equal(run_with_list("Expand", op_tensor(CGE_F32, CGE_SHAPE(1, 300), row), big, 2, NULL, 0, &y), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(500, 300), want);
    op_free_outputs(&y, 1);
    free(want);
    free(row);
}

static void test_expand_errors_and_dynamic(void **state)
{
    static const int64_t s4[] = {4}, neg[] = {-1, 3};
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(3), x24), y;
    assert_meta_error(run_with_list("Expand", x, s4, 1, NULL, 0, &y), "input [3] does not broadcast with shape [4]");
    assert_meta_error(run_with_list("Expand", x, neg, 2, NULL, 0, &y), "entry 0 is -1");
    cge_tensor_desc in[2] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(3, 1)},
                             {.dtype = CGE_I64, .shape = CGE_SHAPE(3)}}, out = {0};
    assert_int_equal(op_infer("Expand", in, NULL, 2, NULL, 0, &out, 1), CGE_OK);
    assert_desc_shape(&out, CGE_SHAPE(DYN, 3, DYN));
}

/* ---- Shape -------------------------------------------------------------- */

static void check_shape_op(cge_tensor x, const cge_attr *attrs, int32_t n, const int64_t *want, int64_t len)
{
    cge_tensor y;
    assert_int_equal(op_run("Shape", &x, 1, attrs, n, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(len), want);
    op_free_outputs(&y, 1);
}

static void test_shape(void **state)
{
    cge_tensor x = op_tensor(CGE_F32, CGE_SHAPE(2, 3, 4), x24);
    static const int64_t all[] = {2, 3, 4};
    check_shape_op(x, NULL, 0, all, 3);
    cge_attr a[2] = {attr_int("start", 1)};
    check_shape_op(x, a, 1, all + 1, 2);
    a[0] = attr_int("end", -1);
    check_shape_op(x, a, 1, all, 2);
    a[0] = attr_int("start", -10);
    a[1] = attr_int("end", 100);
    check_shape_op(x, a, 2, all, 3);
    a[0] = attr_int("start", 2);
    a[1] = attr_int("end", 1);
    check_shape_op(x, a, 2, all, 0);
    a[0] = attr_int("start", -1);
    check_shape_op(op_tensor(CGE_BOOL, CGE_SHAPE(5, 7), x24), a, 1, (const int64_t[]){7}, 1);
    check_shape_op(op_tensor(CGE_F32, CGE_SCALAR, x24), NULL, 0, all, 0);
    static const float dummy = 0;
    check_shape_op(op_tensor(CGE_F32, CGE_SHAPE(0, 5), &dummy), NULL, 0, (const int64_t[]){0, 5}, 2);
    /* Meta: only the rank matters, dynamic dims are fine. */
    cge_tensor_desc in = {.dtype = CGE_F16, .shape = CGE_SHAPE(DYN, 3, DYN)}, out = {0};
    assert_int_equal(op_infer("Shape", &in, NULL, 1, NULL, 0, &out, 1), CGE_OK);
    assert_desc_shape(&out, CGE_SHAPE(3));
    assert_int_equal(out.dtype, CGE_I64);
}

/* ---- Constant ----------------------------------------------------------- */

static void test_constant(void **state)
{
    cge_tensor y;
    static const double d[] = {1.5, -2.5, 3.25, 4.0};
    cge_tensor t = op_tensor(CGE_F64, CGE_SHAPE(2, 2), d);
    cge_attr a = {.name = "value", .kind = CGE_ATTR_TENSOR, .t = &t};
    assert_int_equal(op_run("Constant", NULL, 0, &a, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F64, CGE_SHAPE(2, 2), d);
    op_free_outputs(&y, 1);
    uint16_t h[3] = {cge_f32_to_f16(0.5f), cge_f32_to_f16(-1.0f), cge_f32_to_f16(8.0f)};
    t = op_tensor(CGE_F16, CGE_SHAPE(3), h);
    assert_int_equal(op_run("Constant", NULL, 0, &a, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F16, CGE_SHAPE(3), h);
    op_free_outputs(&y, 1);

    a = (cge_attr){.name = "value_float", .kind = CGE_ATTR_FLOAT, .f = 2.5f};
    static const float f = 2.5f;
    assert_int_equal(op_run("Constant", NULL, 0, &a, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SCALAR, &f);
    op_free_outputs(&y, 1);

    static const float fs[] = {1.0f, -2.0f, 3.5f};
    a = (cge_attr){.name = "value_floats", .kind = CGE_ATTR_FLOATS, .floats = fs, .n = 3};
    assert_int_equal(op_run("Constant", NULL, 0, &a, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3), fs);
    op_free_outputs(&y, 1);

    static const int64_t i = -7;
    a = (cge_attr){.name = "value_int", .kind = CGE_ATTR_INT, .i = -7};
    assert_int_equal(op_run("Constant", NULL, 0, &a, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_I64, CGE_SCALAR, &i);
    op_free_outputs(&y, 1);

    static const int64_t is[] = {4, 5};
    a = (cge_attr){.name = "value_ints", .kind = CGE_ATTR_INTS, .ints = is, .n = 2};
    assert_int_equal(op_run("Constant", NULL, 0, &a, 1, &y, 1), CGE_OK);
    op_assert_equal(&y, CGE_I64, CGE_SHAPE(2), is);
    op_free_outputs(&y, 1);
}

static void test_constant_errors(void **state)
{
    cge_tensor y;
    cge_attr two[2] = {{.name = "value_int", .kind = CGE_ATTR_INT, .i = 1},
                       {.name = "value_float", .kind = CGE_ATTR_FLOAT, .f = 1.0f}};
    assert_meta_error(op_run("Constant", NULL, 0, two, 2, &y, 1), "exactly one of");
    assert_meta_error(op_run("Constant", NULL, 0, NULL, 0, &y, 1), "found 0");
    cge_attr s = {.name = "value_string", .kind = CGE_ATTR_STRING, .s = "hello"};
    assert_meta_error(op_run("Constant", NULL, 0, &s, 1, &y, 1), "'value_string' is not supported");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshape_f32),
        cmocka_unit_test(test_reshape_dtypes_and_scalars),
        cmocka_unit_test(test_reshape_allowzero),
        cmocka_unit_test(test_reshape_errors),
        cmocka_unit_test(test_reshape_dynamic_meta),
        cmocka_unit_test(test_flatten),
        cmocka_unit_test(test_flatten_errors_and_dynamic),
        cmocka_unit_test(test_squeeze),
        cmocka_unit_test(test_squeeze_errors_and_dynamic),
        cmocka_unit_test(test_unsqueeze),
        cmocka_unit_test(test_unsqueeze_errors_and_dynamic),
        cmocka_unit_test(test_expand_fixtures),
        cmocka_unit_test(test_expand_scalar_empty_large),
        cmocka_unit_test(test_expand_errors_and_dynamic),
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_constant_errors),
    };
    return cmocka_run_group_tests(tests, setup_x24, NULL);
}
