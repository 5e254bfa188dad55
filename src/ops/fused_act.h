/* The Gelu element functions of the fused float32 kernels (ElementwiseChain,
 * FusedMatMul's epilogue): the same expressions as the unfused Gelu kernel,
 * so that fusing changes no bits. */
#ifndef CGE_OPS_FUSED_ACT_H
#define CGE_OPS_FUSED_ACT_H

#include <math.h>

#include "ops/fast_math.h"

static inline double cge__sigmoid_d(double x)
{
    if (x >= 0.0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

/* fast_math's: the unfused Gelu and Erf rows use it too. */
static inline float cge__gelu_f(float x)
{
    return cge__gelu_erf_fast(x);
}

static inline float cge__gelu_tanh_f(float x)
{
    const double k = 0.7978845608028654, d = x;
    return (float)(d * cge__sigmoid_d(2.0 * (k * (d + 0.044715 * d * d * d))));
}

#endif
