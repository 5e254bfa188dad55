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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum_node_cases),
        cmocka_unit_test(test_einsum_meta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
