/* The ai.onnx.preview.training optimizers: Adagrad, Momentum (standard and
 * Nesterov) and Adam against the update formulas of ONNX's operator
 * documentation computed here in double, for two tensors of different shapes
 * and T = 0 and T > 0; and the errors for miscounted or mismatched inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "op_runner.h"

#define DOMAIN "ai.onnx.preview.training"

static const float X1[1] = {1.0f}, G1[1] = {-1.0f}, V1[1] = {2.0f}, H1[1] = {0.5f};
static const float X2[2] = {1.0f, 2.0f}, G2[2] = {-1.0f, -3.0f}, V2[2] = {4.0f, 1.0f},
                   H2[2] = {1.0f, 10.0f};

static void check(const cge_tensor *t, const double *want, int n)
{
    float w[2];
    for (int i = 0; i < n; i++)
        w[i] = (float)want[i];
    op_assert_close(t, CGE_F32, n == 1 ? CGE_SHAPE(1) : CGE_SHAPE(2), w, 1e-6, 1e-7);
}

static void test_adagrad(void **state)
{
    for (int64_t t = 0; t < 3; t += 2) {
        float r = 0.1f;
        cge_tensor in[8] = {op_tensor(CGE_F32, CGE_SCALAR, &r), op_tensor(CGE_I64, CGE_SCALAR, &t),
                            op_tensor(CGE_F32, CGE_SHAPE(1), X1), op_tensor(CGE_F32, CGE_SHAPE(2), X2),
                            op_tensor(CGE_F32, CGE_SHAPE(1), G1), op_tensor(CGE_F32, CGE_SHAPE(2), G2),
                            op_tensor(CGE_F32, CGE_SHAPE(1), H1), op_tensor(CGE_F32, CGE_SHAPE(2), H2)};
        cge_attr at[3] = {CGE_ATTR_F("decay_factor", 0.1f), CGE_ATTR_F("epsilon", 1e-5f),
                          CGE_ATTR_F("norm_coefficient", 0.001f)};
        cge_tensor out[4];
        if (op_run_domain(DOMAIN, "Adagrad", in, 8, at, 3, out, 4))
            fail_msg("%s", cge_last_error());
        const float *xs[2] = {X1, X2}, *gs[2] = {G1, G2}, *hs[2] = {H1, H2};
        for (int k = 0; k < 2; k++) {
            double xn[2], hn[2];
            for (int i = 0; i <= k; i++) {
                double g = 0.001f * (double)xs[k][i] + gs[k][i];
                hn[i] = hs[k][i] + g * g;
                double rate = 0.1f / (1.0 + (double)t * 0.1f);
                xn[i] = xs[k][i] - rate * g / (sqrt(hn[i]) + 1e-5f);
            }
            check(&out[k], xn, k + 1);
            check(&out[2 + k], hn, k + 1);
        }
        op_free_outputs(out, 4);
    }
}

static void test_momentum(void **state)
{
    for (int nesterov = 0; nesterov < 2; nesterov++)
        for (int64_t t = 0; t < 2; t++) {
            float r = 0.1f;
            cge_tensor in[8] = {op_tensor(CGE_F32, CGE_SCALAR, &r),
                                op_tensor(CGE_I64, CGE_SCALAR, &t),
                                op_tensor(CGE_F32, CGE_SHAPE(1), X1), op_tensor(CGE_F32, CGE_SHAPE(2), X2),
                                op_tensor(CGE_F32, CGE_SHAPE(1), G1), op_tensor(CGE_F32, CGE_SHAPE(2), G2),
                                op_tensor(CGE_F32, CGE_SHAPE(1), V1), op_tensor(CGE_F32, CGE_SHAPE(2), V2)};
            cge_attr at[4] = {CGE_ATTR_F("alpha", 0.95f), CGE_ATTR_F("beta", 0.85f),
                              CGE_ATTR_S("mode", nesterov ? "nesterov" : "standard"),
                              CGE_ATTR_F("norm_coefficient", 0.01f)};
            cge_tensor out[4];
            assert_int_equal(op_run_domain(DOMAIN, "Momentum", in, 8, at, 4, out, 4), CGE_OK);
            const float *xs[2] = {X1, X2}, *gs[2] = {G1, G2}, *vs[2] = {V1, V2};
            for (int k = 0; k < 2; k++) {
                double xn[2], vn[2];
                for (int i = 0; i <= k; i++) {
                    double g = 0.01f * (double)xs[k][i] + gs[k][i];
                    double beta = t > 0 ? 0.85f : 1.0;
                    vn[i] = 0.95f * (double)vs[k][i] + beta * g;
                    xn[i] = xs[k][i] - 0.1f * (nesterov ? g + 0.95f * vn[i] : vn[i]);
                }
                check(&out[k], xn, k + 1);
                check(&out[2 + k], vn, k + 1);
            }
            op_free_outputs(out, 4);
        }
}

static void test_adam(void **state)
{
    for (int64_t t = 0; t < 4; t += 3) {
        float r = 0.1f;
        cge_tensor in[10] = {op_tensor(CGE_F32, CGE_SCALAR, &r), op_tensor(CGE_I64, CGE_SCALAR, &t),
                             op_tensor(CGE_F32, CGE_SHAPE(1), X1), op_tensor(CGE_F32, CGE_SHAPE(2), X2),
                             op_tensor(CGE_F32, CGE_SHAPE(1), G1), op_tensor(CGE_F32, CGE_SHAPE(2), G2),
                             op_tensor(CGE_F32, CGE_SHAPE(1), V1), op_tensor(CGE_F32, CGE_SHAPE(2), V2),
                             op_tensor(CGE_F32, CGE_SHAPE(1), H1), op_tensor(CGE_F32, CGE_SHAPE(2), H2)};
        cge_attr at[5] = {CGE_ATTR_F("alpha", 0.95f), CGE_ATTR_F("beta", 0.85f),
                          CGE_ATTR_F("epsilon", 1e-2f), CGE_ATTR_F("norm_coefficient", 0.001f),
                          CGE_ATTR_F("norm_coefficient_post", 0.01f)};
        cge_tensor out[6];
        assert_int_equal(op_run_domain(DOMAIN, "Adam", in, 10, at, 5, out, 6), CGE_OK);
        const float *xs[2] = {X1, X2}, *gs[2] = {G1, G2}, *vs[2] = {V1, V2}, *hs[2] = {H1, H2};
        for (int k = 0; k < 2; k++) {
            double xn[2], vn[2], hn[2];
            for (int i = 0; i <= k; i++) {
                double g = 0.001f * (double)xs[k][i] + gs[k][i];
                vn[i] = 0.95f * (double)vs[k][i] + (1 - 0.95f) * g;
                hn[i] = 0.85f * (double)hs[k][i] + (1 - 0.85f) * g * g;
                double rate = t > 0 ? 0.1f * sqrt(1 - pow(0.85f, (double)t)) /
                                          (1 - pow(0.95f, (double)t))
                                    : 0.1f;
                xn[i] = (1 - 0.01f) * (xs[k][i] - rate * vn[i] / (sqrt(hn[i]) + 1e-2f));
            }
            check(&out[k], xn, k + 1);
            check(&out[2 + k], vn, k + 1);
            check(&out[4 + k], hn, k + 1);
        }
        op_free_outputs(out, 6);
    }
}

static void test_errors(void **state)
{
    float r = 0.1f;
    int64_t t = 1;
    cge_tensor in[5] = {op_tensor(CGE_F32, CGE_SCALAR, &r), op_tensor(CGE_I64, CGE_SCALAR, &t),
                        op_tensor(CGE_F32, CGE_SHAPE(1), X1), op_tensor(CGE_F32, CGE_SHAPE(2), G2),
                        op_tensor(CGE_F32, CGE_SHAPE(1), H1)};
    cge_tensor out[3];
    /* G has another shape than X */
    op_assert_error(op_run_domain(DOMAIN, "Adagrad", in, 5, NULL, 0, out, 2), "[meta]",
                    "must match tensor 0");
    /* 5 inputs cannot make Adam's 4 per tensor */
    in[3] = op_tensor(CGE_F32, CGE_SHAPE(1), G1);
    op_assert_error(op_run_domain(DOMAIN, "Adam", in, 5, NULL, 0, out, 3), "[meta]",
                    "R, T and 4 tensors per optimized tensor");
    cge_attr bad[4] = {CGE_ATTR_F("alpha", 0.9f), CGE_ATTR_F("beta", 1.0f),
                       CGE_ATTR_S("mode", "sideways"), CGE_ATTR_F("norm_coefficient", 0.0f)};
    op_assert_error(op_run_domain(DOMAIN, "Momentum", in, 5, bad, 4, out, 2), "[meta]",
                    "neither standard nor nesterov");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adagrad),
        cmocka_unit_test(test_momentum),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
