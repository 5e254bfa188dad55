/* Row loops of the float unary operators, shared by unary.c and unary_ext.c:
 * for an element function pair OP##_f (float) and OP##_d (double) taking a
 * parameter of type PT, rows of float32, float64, and float16 / bfloat16
 * computed in float32. ARGS is the file's argument struct, PAR its member
 * holding the parameter. */
#ifndef CGE_OPS_FLOAT_ROWS_H
#define CGE_OPS_FLOAT_ROWS_H

#include "ops/kernel_util.h"

/* float64, float16 and bfloat16 rows. */
#define CGE_WIDE_FLOAT_ROWS(OP, ARGS, PT, PAR)                                           \
    static void OP##_f64(const void *in_, void *out_, int64_t n, const ARGS *a)          \
    {                                                                                    \
        const double *in = in_;                                                          \
        double *out = out_;                                                              \
        const PT p = a->PAR;                                                             \
        for (int64_t k = 0; k < n; k++)                                                  \
            out[k] = OP##_d(in[k], p);                                                   \
    }                                                                                    \
    static void OP##_f16(const void *in_, void *out_, int64_t n, const ARGS *a)          \
    {                                                                                    \
        const uint16_t *in = in_;                                                        \
        uint16_t *out = out_;                                                            \
        const PT p = a->PAR;                                                             \
        for (int64_t k = 0; k < n; k++)                                                  \
            out[k] = cge_f32_to_f16(OP##_f(cge_f16_to_f32(in[k]), p));                   \
    }                                                                                    \
    static void OP##_bf16(const void *in_, void *out_, int64_t n, const ARGS *a)         \
    {                                                                                    \
        const uint16_t *in = in_;                                                        \
        uint16_t *out = out_;                                                            \
        const PT p = a->PAR;                                                             \
        for (int64_t k = 0; k < n; k++)                                                  \
            out[k] = cge_f32_to_bf16(OP##_f(cge_bf16_to_f32(in[k]), p));                 \
    }

/* All four, float32 by the element function. */
#define CGE_FLOAT_ROWS(OP, ARGS, PT, PAR)                                                \
    static void OP##_f32(const void *in_, void *out_, int64_t n, const ARGS *a)          \
    {                                                                                    \
        const float *in = in_;                                                           \
        float *out = out_;                                                               \
        const PT p = a->PAR;                                                             \
        for (int64_t k = 0; k < n; k++)                                                  \
            out[k] = OP##_f(in[k], p);                                                   \
    }                                                                                    \
    CGE_WIDE_FLOAT_ROWS(OP, ARGS, PT, PAR)

#endif
