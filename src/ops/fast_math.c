/* Vectorised rows of the float32 functions of fast_math.h: one clone per
 * instruction set, picked when the library loads. */
#include "ops/fast_math.h"

#include "ops/kernel_util.h"

/* The clones are file-local (multiversioned functions with external linkage
 * do not link the same way under every compiler); the exported names call
 * them. */

CGE_TARGET_CLONES
static void exp_row(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = cge__expf_fast(x[i]);
}

CGE_TARGET_CLONES
static void sigmoid_row(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = cge__sigmoidf_fast(x[i]);
}

CGE_TARGET_CLONES
static void erf_row(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = cge__erff_fast(x[i]);
}

CGE_TARGET_CLONES
static void gelu_row(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = cge__gelu_erf_fast(x[i]);
}

/* x * sigmoid(x) as Sigmoid then Mul compute it: the same bits. */
CGE_TARGET_CLONES
static void silu_row(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * cge__sigmoidf_fast(x[i]);
}

void cge__silu_f32_row(float *y, const float *x, int64_t n)
{
    silu_row(y, x, n);
}

void cge__erf_f32_row(float *y, const float *x, int64_t n)
{
    erf_row(y, x, n);
}

void cge__gelu_f32_row(float *y, const float *x, int64_t n)
{
    gelu_row(y, x, n);
}

void cge__exp_f32_row(float *y, const float *x, int64_t n)
{
    exp_row(y, x, n);
}

void cge__sigmoid_f32_row(float *y, const float *x, int64_t n)
{
    sigmoid_row(y, x, n);
}
