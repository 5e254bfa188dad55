/* float16 / bfloat16 <-> float32 over arrays, with the CPU's conversion
 * instructions (F16C) for float16 where it has them: the same bits as
 * cge_f16_to_f32 / cge_f32_to_f16 and cge_bf16_to_f32 / cge_f32_to_bf16
 * element by element (round to nearest even, subnormals kept, NaNs quiet).
 * Cast's rows, the kernels that run half data on float32 copies and the
 * compiler's widened constants use them. */
#ifndef CGE_OPS_HALF_CONVERT_H
#define CGE_OPS_HALF_CONVERT_H

#include <stdint.h>

#include "cge/types.h"

void cge__f16_to_f32_n(const uint16_t *in, float *out, int64_t n);
void cge__f32_to_f16_n(const float *in, uint16_t *out, int64_t n);
/* `half` is CGE_F16 or CGE_BF16. */
void cge__half_to_f32_n(cge_dtype half, const uint16_t *in, float *out, int64_t n);
void cge__f32_to_half_n(cge_dtype half, const float *in, uint16_t *out, int64_t n);

#endif
