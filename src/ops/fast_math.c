/* Vectorised rows of the float32 functions of fast_math.h: one clone per
 * instruction set, picked when the library loads. */
#include "ops/fast_math.h"

#include "ops/kernel_util.h"

/* The clones are file-local (multiversioned functions with external linkage
 * do not link the same way under every compiler); the exported names call
 * them. */
#define FAST_ROW(NAME, EXPR)                                                             \
    CGE_TARGET_CLONES                                                                    \
    static void NAME##_row(float *y, const float *x, int64_t n)                          \
    {                                                                                    \
        for (int64_t i = 0; i < n; i++)                                                  \
            y[i] = EXPR;                                                                 \
    }                                                                                    \
    void cge__##NAME##_f32_row(float *y, const float *x, int64_t n)                      \
    {                                                                                    \
        NAME##_row(y, x, n);                                                             \
    }

FAST_ROW(exp, cge__expf_fast(x[i]))
FAST_ROW(sigmoid, cge__sigmoidf_fast(x[i]))
FAST_ROW(tanh, cge__tanhf_fast(x[i]))
FAST_ROW(erf, cge__erff_fast(x[i]))
FAST_ROW(gelu, cge__gelu_erf_fast(x[i]))
/* x * sigmoid(x) as Sigmoid then Mul compute it: the same bits. */
FAST_ROW(silu, x[i] * cge__sigmoidf_fast(x[i]))
