/* float16 <-> float32 over arrays, with the CPU's conversion instructions
 * (F16C) where it has them: the same bits as cge_f16_to_f32 and
 * cge_f32_to_f16 element by element (round to nearest even, subnormals kept,
 * NaNs quiet). Cast's rows and the kernels that widen half data use them. */
#ifndef CGE_OPS_HALF_CONVERT_H
#define CGE_OPS_HALF_CONVERT_H

#include <stdint.h>

void cge__f16_to_f32_n(const uint16_t *in, float *out, int64_t n);
void cge__f32_to_f16_n(const float *in, uint16_t *out, int64_t n);

#endif
