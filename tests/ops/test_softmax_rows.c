/* Softmax along a contiguous float32 row (the per-ISA row kernel): every row
 * length around its 16-wide steps and its 256-element buffer, against a
 * float64 reference; rows with -inf entries, a NaN, and extreme values. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "op_runner.h"

static cge_tensor softmax_last(const float *x, int64_t rows, int64_t n)
{
    cge_tensor t = op_tensor(CGE_F32, CGE_SHAPE(rows, n), x);
    cge_attr a = {.name = "axis", .kind = CGE_ATTR_INT, .i = -1};
    cge_tensor out[1];
    if (op_run("Softmax", &t, 1, &a, 1, out, 1) != CGE_OK)
        fail_msg("Softmax [%lld,%lld] failed: %s", (long long)rows, (long long)n, cge_last_error());
    return out[0];
}

static void reference(const float *x, int64_t n, double *y)
{
    double m = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
    for (int64_t j = 0; j < n; j++)
        s += exp((double)x[j] - m);
    for (int64_t j = 0; j < n; j++)
        y[j] = exp((double)x[j] - m) / s;
}

static void test_row_lengths(void **state)
{
    const int64_t rows = 3;
    for (int64_t n = 1; n <= 300; n += n < 40 ? 1 : n < 260 ? 23 : 1) {
        float *x = malloc(sizeof(float) * (size_t)(rows * n));
        double *want = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < rows * n; i++)
            x[i] = (float)((double)((i * 37 + n * 11) % 101) / 50.0 - 1.0) * 6.0f;
        cge_tensor y = softmax_last(x, rows, n);
        const float *got = y.data;
        for (int64_t r = 0; r < rows; r++) {
            reference(x + r * n, n, want);
            double sum = 0.0;
            for (int64_t j = 0; j < n; j++) {
                double g = got[r * n + j];
                sum += g;
                if (!(fabs(g - want[j]) <= 2e-6 * want[j] + 1e-12))
                    fail_msg("n %lld row %lld [%lld]: got %.9g, expected %.9g", (long long)n,
                             (long long)r, (long long)j, g, want[j]);
            }
            assert_true(fabs(sum - 1.0) < 1e-5);
        }
        op_free_outputs(&y, 1);
        free(x);
        free(want);
    }
}

static void test_special_rows(void **state)
{
    enum { N = 37 };
    float x[4 * N];
    for (int j = 0; j < N; j++) {
        x[j] = j % 3 ? -INFINITY : (float)j;           /* -inf entries give exactly 0 */
        x[N + j] = j == 20 ? NAN : (float)j;            /* a NaN poisons its row */
        x[2 * N + j] = j == 33 ? 1e30f : -1e30f;        /* one huge value takes all */
        x[3 * N + j] = (float)(j - 18) * 3.0f;          /* exp underflows at the low end */
    }
    cge_tensor y = softmax_last(x, 4, N);
    const float *got = y.data;
    double want[N];
    reference(x, N, want);
    for (int j = 0; j < N; j++) {
        if (j % 3)
            assert_true(got[j] == 0.0f);
        else
            assert_true(fabs(got[j] - want[j]) <= 2e-6 * want[j] + 1e-12);
        assert_true(isnan(got[N + j]));
        assert_true(got[2 * N + j] == (j == 33 ? 1.0f : 0.0f));
    }
    reference(x + 3 * N, N, want);
    for (int j = 0; j < N; j++)
        assert_true(fabs(got[3 * N + j] - want[j]) <= 2e-6 * want[j] + 1e-30);
    op_free_outputs(&y, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_lengths),
        cmocka_unit_test(test_special_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
