/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: every ONNX 1.12 node
 * case plus numpy-referenced ones (loss_fixtures.h: float64, int32 targets,
 * ignore_index with and without weights, every reduction, 0/0 means), then
 * meta errors, targets out of range and independence from the block split. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loss_fixtures.h"

static void test_loss_node_cases(void **state)
{
    assert_true(NUM_LOSS_CASES >= 100);
    nc_run_all(loss_cases, NUM_LOSS_CASES);
}

static void test_loss_meta(void **state)
{
    cge_tensor_desc in[3] = {
        {.dtype = CGE_F32, .shape = CGE_SHAPE(4, 5, 6)},
        {.dtype = CGE_I64, .shape = CGE_SHAPE(4, 6)},
        {.dtype = CGE_F32, .shape = CGE_SHAPE(5)},
    };
    cge_tensor_desc out[2];
    cge_attr none = CGE_ATTR_S("reduction", "none");
    assert_int_equal(op_infer("NegativeLogLikelihoodLoss", in, NULL, 3, &none, 1, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(4, 6)));
    assert_int_equal(out[0].dtype, CGE_F32);
    assert_int_equal(op_infer("SoftmaxCrossEntropyLoss", in, NULL, 3, NULL, 0, out, 2), CGE_OK);
    assert_int_equal(out[0].shape.rank, 0);
    assert_true(cge_shape_equal(&out[1].shape, &CGE_SHAPE(4, 5, 6)));

    /* a dynamic batch is taken from whichever side knows it */
    in[0].shape.dims[0] = CGE_DIM_DYNAMIC;
    assert_int_equal(op_infer("NegativeLogLikelihoodLoss", in, NULL, 3, &none, 1, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(4, 6)));
    in[0].shape.dims[0] = 4;

    cge_attr bad = CGE_ATTR_S("reduction", "max");
    op_assert_error(op_infer("NegativeLogLikelihoodLoss", in, NULL, 3, &bad, 1, out, 1), "[meta]",
                    "reduction");
    in[1].shape = CGE_SHAPE(4, 7);
    op_assert_error(op_infer("NegativeLogLikelihoodLoss", in, NULL, 3, NULL, 0, out, 1), "[meta]",
                    "target dim 1");
    in[1].shape = CGE_SHAPE(4);
    op_assert_error(op_infer("SoftmaxCrossEntropyLoss", in, NULL, 3, NULL, 0, out, 1), "[meta]",
                    "rank");
    in[1].shape = CGE_SHAPE(4, 6);
    in[2].shape = CGE_SHAPE(4);
    op_assert_error(op_infer("NegativeLogLikelihoodLoss", in, NULL, 3, NULL, 0, out, 1), "[meta]",
                    "weight");
    in[2].shape = CGE_SHAPE(5);
    in[2].dtype = CGE_F64;
    op_assert_error(op_infer("NegativeLogLikelihoodLoss", in, NULL, 3, NULL, 0, out, 1), "[meta]",
                    "weight");
    in[0].shape = CGE_SHAPE(5);
    op_assert_error(op_infer("NegativeLogLikelihoodLoss", in, NULL, 2, NULL, 0, out, 1), "[meta]",
                    "rank 1");
}

static void test_loss_target_out_of_range(void **state)
{
    float x[6] = {-1, -2, -3, -4, -5, -6};
    int64_t t[2] = {1, 3};
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(2, 3), x),
                        op_tensor(CGE_I64, CGE_SHAPE(2), t)};
    cge_tensor out[1];
    op_assert_error(op_run("NegativeLogLikelihoodLoss", in, 2, NULL, 0, out, 1), "[kernel]",
                    "target 3");
    /* ... unless it is the ignored class */
    cge_attr ii = CGE_ATTR_I("ignore_index", 3);
    assert_int_equal(op_run("NegativeLogLikelihoodLoss", in, 2, &ii, 1, out, 1), CGE_OK);
    assert_true(fabsf(((float *)out[0].data)[0] - 2.0f) < 1e-6f); /* -x[0][1] / 1 */
    op_free_outputs(out, 1);
    t[1] = -1;
    op_assert_error(op_run("SoftmaxCrossEntropyLoss", in, 2, NULL, 0, out, 1), "[kernel]",
                    "target -1");
}

/* A sum over many positions (several blocks) equals the sum of the per-position
 * losses that reduction none gives, added in order in double. */
static void test_loss_sum_matches_none(void **state)
{
    enum { N = 8, C = 7, D = 1000 };
    float *x = malloc(sizeof(float) * N * C * D);
    int32_t *t = malloc(sizeof(int32_t) * N * D);
    float w[C];
    assert_non_null(x);
    assert_non_null(t);
    uint32_t s = 12345;
    for (int i = 0; i < N * C * D; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / (float)(1 << 24) * 4.0f - 2.0f;
    }
    for (int i = 0; i < N * D; i++)
        t[i] = (int32_t)((i * 7919) % C);
    for (int c = 0; c < C; c++)
        w[c] = 0.5f + 0.25f * (float)c;
    cge_tensor in[3] = {op_tensor(CGE_F32, CGE_SHAPE(N, C, D), x),
                        op_tensor(CGE_I32, CGE_SHAPE(N, D), t),
                        op_tensor(CGE_F32, CGE_SHAPE(C), w)};
    cge_attr red_none = CGE_ATTR_S("reduction", "none"), red_sum = CGE_ATTR_S("reduction", "sum"),
             red_mean = CGE_ATTR_S("reduction", "mean");
    cge_tensor none[2], sum[1], mean[1];
    assert_int_equal(op_run("SoftmaxCrossEntropyLoss", in, 3, &red_none, 1, none, 2), CGE_OK);
    assert_int_equal(op_run("SoftmaxCrossEntropyLoss", in, 3, &red_sum, 1, sum, 1), CGE_OK);
    assert_int_equal(op_run("SoftmaxCrossEntropyLoss", in, 3, &red_mean, 1, mean, 1), CGE_OK);
    double total = 0.0, wsum = 0.0;
    for (int i = 0; i < N * D; i++) {
        total += ((float *)none[0].data)[i];
        wsum += w[t[i]];
    }
    /* log_prob rows are normalised */
    const float *lp = none[1].data;
    for (int k = 0; k < 5; k++) {
        int n = k, d = k * 97;
        double p = 0.0;
        for (int c = 0; c < C; c++)
            p += exp(lp[(n * C + c) * D + d]);
        assert_true(fabs(p - 1.0) < 1e-5);
    }
    assert_true(fabs(((float *)sum[0].data)[0] - total) <= 1e-5 * fabs(total));
    assert_true(fabs(((float *)mean[0].data)[0] - total / wsum) <= 1e-5 * fabs(total / wsum));
    op_free_outputs(none, 2);
    op_free_outputs(sum, 1);
    op_free_outputs(mean, 1);
    free(x);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_node_cases),
        cmocka_unit_test(test_loss_meta),
        cmocka_unit_test(test_loss_target_out_of_range),
        cmocka_unit_test(test_loss_sum_matches_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
