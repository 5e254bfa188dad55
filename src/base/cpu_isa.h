/* cge__cpu_has: whether this machine has every feature in `features` (CGE_CPU_*
 * bits), as cge_cpu_features answers it: CGE_CPU_ISA's cap applied, so kernels
 * that ask here can all be pinned to their AVX2 or portable path. Kernels
 * choose their instruction set through this, never __builtin_cpu_supports. */
#ifndef CGE_BASE_CPU_ISA_H
#define CGE_BASE_CPU_ISA_H

#include <stdbool.h>
#include <stdint.h>

#include "cge/model_file.h"

static inline bool cge__cpu_has(uint64_t features)
{
    return (cge_cpu_features() & features) == features;
}

#endif
