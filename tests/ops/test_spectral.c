/* Spectral operators: every ONNX 1.12 node case plus numpy-referenced cases
 * (spectral_fixtures.h: onesided, odd and power-of-two lengths, dft_length
 * padding and truncation, complex and inverse transforms, STFT with complex
 * signals, windows in other dtypes, MelWeightMatrix), and meta errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spectral_fixtures.h"

static void test_spectral_node_cases(void **state)
{
    nc_run_all(spectral_cases, NUM_SPECTRAL_CASES);
}

static void test_spectral_meta(void **state)
{
    cge_tensor_desc out[1];
    cge_tensor_desc x[2] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(2, 10, 3)}};
    op_assert_error(op_infer("DFT", x, NULL, 1, NULL, 0, out, 1), "[meta]", "1 or 2");
    x[0].shape = CGE_SHAPE(2, 10, 2);
    cge_attr one = CGE_ATTR_I("onesided", 1);
    op_assert_error(op_infer("DFT", x, NULL, 1, &one, 1, out, 1), "[meta]", "real");
    cge_attr ax = CGE_ATTR_I("axis", 2);
    op_assert_error(op_infer("DFT", x, NULL, 1, &ax, 1, out, 1), "[meta]", "axis");
    /* dft_length not known at compile time: a dynamic signal dimension */
    x[1] = (cge_tensor_desc){.dtype = CGE_I64, .shape = CGE_SCALAR};
    assert_int_equal(op_infer("DFT", x, NULL, 2, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].shape.dims[1], CGE_DIM_DYNAMIC);
    int64_t len = 7;
    const void *vals[2] = {NULL, &len};
    x[0].shape = CGE_SHAPE(2, 10, 1);
    assert_int_equal(op_infer("DFT", x, vals, 2, &one, 1, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(2, 4, 2)));

    /* windows: size known only at run time -> dynamic; a bad output_datatype */
    cge_tensor_desc sz = {.dtype = CGE_I32, .shape = CGE_SCALAR};
    assert_int_equal(op_infer("HannWindow", &sz, NULL, 1, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].shape.dims[0], CGE_DIM_DYNAMIC);
    cge_attr bad = CGE_ATTR_I("output_datatype", 9);
    op_assert_error(op_infer("HannWindow", &sz, NULL, 1, &bad, 1, out, 1), "[meta]",
                    "output_datatype");

    cge_tensor_desc s[4] = {
        {.dtype = CGE_F32, .shape = CGE_SHAPE(1, 8, 1)},
        {.dtype = CGE_I64, .shape = CGE_SCALAR},
        {.dtype = CGE_F32, .shape = CGE_SHAPE(16)},
    };
    int64_t step = 4;
    const void *sv[3] = {NULL, &step, NULL};
    op_assert_error(op_infer("STFT", s, sv, 3, NULL, 0, out, 1), "[meta]", "below");
    s[3] = (cge_tensor_desc){.dtype = CGE_I64, .shape = CGE_SCALAR};
    s[2].dtype = CGE_DTYPE_UNDEFINED;
    op_assert_error(op_infer("STFT", s, sv, 2, NULL, 0, out, 1), "[meta]", "window");
}

/* A long power-of-two transform (radix-2 path) against a direct sum. */
static void test_dft_long_fft(void **state)
{
    enum { N = 1024 };
    float *x = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++)
        x[i] = (float)sin(0.37 * i) + (float)((i * 13) % 7) * 0.1f;
    cge_tensor in = op_tensor(CGE_F32, CGE_SHAPE(1, N, 1), x);
    cge_tensor out[1];
    assert_int_equal(op_run("DFT", &in, 1, NULL, 0, out, 1), CGE_OK);
    const float *y = out[0].data;
    for (int k = 0; k < N; k += 61) {
        double re = 0, im = 0;
        for (int j = 0; j < N; j++) {
            double a = -2.0 * 3.14159265358979323846 * (double)((int64_t)j * k % N) / N;
            re += x[j] * cos(a);
            im += x[j] * sin(a);
        }
        assert_float_equal(y[2 * k], re, 1e-3);
        assert_float_equal(y[2 * k + 1], im, 1e-3);
    }
    op_free_outputs(out, 1);
    free(x);
}

/* The table runner itself must notice a wrong value, dtype or shape. */
static void test_runner_detects_mismatch(void **state)
{
    static const int64_t size = 4;
    static const float good[4] = {0.0f, 0.5f, 1.0f, 0.5f};
    static const float bad[4] = {0.0f, 0.5f, 1.0f, 0.51f};
    nc_tensor in = {CGE_I64, 0, {0}, &size};
    nc_tensor out = {CGE_F32, 1, {4}, good};
    nc_case c = {"hann4", "HannWindow", 1, &in, 0, NULL, 1, &out, 1e-6, 1e-6};
    char msg[256];
    assert_int_equal(nc_run(&c, msg, sizeof msg), 0);
    out.data = bad;
    assert_int_not_equal(nc_run(&c, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "element 3"));
    out.data = good;
    out.dims[0] = 5;
    assert_int_not_equal(nc_run(&c, msg, sizeof msg), 0);
    out.dims[0] = 4;
    out.dtype = CGE_F64;
    assert_int_not_equal(nc_run(&c, msg, sizeof msg), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spectral_node_cases),
        cmocka_unit_test(test_spectral_meta),
        cmocka_unit_test(test_dft_long_fft),
        cmocka_unit_test(test_runner_detects_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
