/* The Gelu element functions of the fused float32 kernels (ElementwiseChain,
 * FusedMatMul's epilogue): the same expressions as the unfused Gelu kernel,
 * so that fusing changes no bits. */
#ifndef CGE_OPS_FUSED_ACT_H
#define CGE_OPS_FUSED_ACT_H

#include <math.h>

static inline double cge__sigmoid_d(double x)
{
    if (x >= 0.0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

static inline float cge__gelu_f(float x)
{
    return (float)(0.5 * (double)x * erfc(-(double)x * M_SQRT1_2));
}

static inline float cge__gelu_tanh_f(float x)
{
    const double k = 0.7978845608028654, d = x;
    return (float)(d * cge__sigmoid_d(2.0 * (k * (d + 0.044715 * d * d * d))));
}

#endif
