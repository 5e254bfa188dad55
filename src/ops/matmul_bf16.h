/* bfloat16 execution of float32 matrix products and convolutions: whether this
 * build and CPU have the kernels, and the float32 -> bfloat16 conversion the
 * kernels share. */
#ifndef CGE_OPS_MATMUL_BF16_H
#define CGE_OPS_MATMUL_BF16_H

#include <stdbool.h>
#include <stdint.h>

/* oneDNN is built in and the CPU has AVX512-BF16 (vdpbf16ps) or AMX-BF16:
 * bfloat16 products run faster than float32 ones. Without it the precision
 * pass leaves the graph alone. */
bool cge__bf16_available(void);

/* dst[i] = bfloat16(src[i]) for i in [0, n), rounding to nearest even
 * (vcvtne2ps2bf16 where the CPU has it). */
void cge__f32_to_bf16_row(const float *src, uint16_t *dst, int64_t n);

#endif
