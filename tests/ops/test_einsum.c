/* Einsum: every ONNX 1.12 node case plus numpy-referenced cases
 * (einsum_fixtures.h: GEMM-path contractions with transposed and batched
 * outputs, broadcast ellipsis, diagonals, traces, implicit outputs, three
 * operands, integer and half dtypes), and equation errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "einsum_fixtures.h"
#include "op_runner.h"

static void test_einsum_node_cases(void **state)
{
    nc_run_all(einsum_cases, NUM_EINSUM_CASES);
}

static cge_status infer_eq(const char *eq, cge_tensor_desc *in, int32_t n, cge_tensor_desc *out)
{
    cge_attr a = CGE_ATTR_S("equation", eq);
    return op_infer("Einsum", in, NULL, n, &a, 1, out, 1);
}

static void test_einsum_meta(void **state)
{
    cge_tensor_desc in[2] = {
        {.dtype = CGE_F32, .shape = CGE_SHAPE(2, 3)},
        {.dtype = CGE_F32, .shape = CGE_SHAPE(3, 4)},
    };
    cge_tensor_desc out[1];
    assert_int_equal(infer_eq("ij,jk", in, 2, out), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(2, 4)));
    assert_int_equal(infer_eq("ij,jk->kij", in, 2, out), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(4, 2, 3)));
    op_assert_error(infer_eq("ij,ij->ij", in, 2, out), "[meta]", "sizes");
    op_assert_error(infer_eq("ijk,jk->i", in, 2, out), "[meta]", "rank-2");
    op_assert_error(infer_eq("ij->i", in, 2, out), "[meta]", "terms");
    op_assert_error(infer_eq("ij,jk->iz", in, 2, out), "[meta]", "'z'");
    op_assert_error(infer_eq("ij,jk->ii", in, 2, out), "[meta]", "repeated");
    op_assert_error(infer_eq("i1,jk", in, 2, out), "[meta]", "letter");
    in[1].dtype = CGE_I32;
    op_assert_error(infer_eq("ij,jk", in, 2, out), "[meta]", "int32");
    /* dynamic sizes flow through */
    in[1].dtype = CGE_F32;
    in[0].shape = CGE_SHAPE(CGE_DIM_DYNAMIC, 3);
    assert_int_equal(infer_eq("ij,jk->ki", in, 2, out), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(4, CGE_DIM_DYNAMIC)));
}

/* Operands gathered and outputs scattered over several blocks (each block
 * starts its odometer mid-row): abk,kc->bac gathers A (its M indices b, a
 * do not nest in A's layout) and writes its output in place; abk,kc->cba
 * also scatters the output. Referenced by plain loops in double (rounded
 * to float). */
static void test_einsum_gather_scatter_blocks(void **state)
{
    enum { NA = 40, NB = 30, NK = 40, NC = 35 };
    float *a = malloc(sizeof(float) * NA * NB * NK), *b = malloc(sizeof(float) * NK * NC);
    float *ref = malloc(sizeof(float) * NA * NB * NC);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(ref);
    uint32_t seed = 7;
    for (int i = 0; i < NA * NB * NK; i++)
        a[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < NK * NC; i++)
        b[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    const char *eqs[2] = {"abk,kc->bac", "abk,kc->cba"};
    for (int e = 0; e < 2; e++) {
        for (int ia = 0; ia < NA; ia++)
            for (int ib = 0; ib < NB; ib++)
                for (int ic = 0; ic < NC; ic++) {
                    double acc = 0.0;
                    for (int k = 0; k < NK; k++)
                        acc += (double)a[(ia * NB + ib) * NK + k] * b[k * NC + ic];
                    int64_t at = e == 0 ? ((int64_t)ib * NA + ia) * NC + ic
                                        : ((int64_t)ic * NB + ib) * NA + ia;
                    ref[at] = (float)acc;
                }
        cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(NA, NB, NK), a),
                            op_tensor(CGE_F32, CGE_SHAPE(NK, NC), b)};
        cge_attr at = CGE_ATTR_S("equation", eqs[e]);
        cge_tensor out[1];
        assert_int_equal(op_run("Einsum", in, 2, &at, 1, out, 1), CGE_OK);
        op_assert_close(&out[0], CGE_F32, e == 0 ? CGE_SHAPE(NB, NA, NC) : CGE_SHAPE(NC, NB, NA),
                        ref, 1e-5, 1e-5);
        op_free_outputs(out, 1);
    }
    free(a);
    free(b);
    free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum_node_cases),
        cmocka_unit_test(test_einsum_meta),
        cmocka_unit_test(test_einsum_gather_scatter_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
