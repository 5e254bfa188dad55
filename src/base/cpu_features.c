/* cge_cpu_features (include/cge/model_file.h): the CPU features this machine
 * has, in the base layer so that the kernels' own checks (bf16, VNNI) and the
 * model file's requirements read the one answer. */
#include <stdint.h>

#include "cge/model_file.h"

uint64_t cge_cpu_features(void)
{
    uint64_t f = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f |= __builtin_cpu_supports("sse2") ? CGE_CPU_SSE2 : 0;
    f |= __builtin_cpu_supports("sse3") ? CGE_CPU_SSE3 : 0;
    f |= __builtin_cpu_supports("ssse3") ? CGE_CPU_SSSE3 : 0;
    f |= __builtin_cpu_supports("sse4.1") ? CGE_CPU_SSE4_1 : 0;
    f |= __builtin_cpu_supports("sse4.2") ? CGE_CPU_SSE4_2 : 0;
    f |= __builtin_cpu_supports("popcnt") ? CGE_CPU_POPCNT : 0;
    f |= __builtin_cpu_supports("avx") ? CGE_CPU_AVX : 0;
    f |= __builtin_cpu_supports("avx2") ? CGE_CPU_AVX2 : 0;
    f |= __builtin_cpu_supports("fma") ? CGE_CPU_FMA : 0;
    f |= __builtin_cpu_supports("bmi2") ? CGE_CPU_BMI2 : 0;
    f |= __builtin_cpu_supports("avx512f") ? CGE_CPU_AVX512F : 0;
    f |= __builtin_cpu_supports("avx512bw") ? CGE_CPU_AVX512BW : 0;
    f |= __builtin_cpu_supports("avx512vl") ? CGE_CPU_AVX512VL : 0;
    f |= __builtin_cpu_supports("avx512vnni") ? CGE_CPU_AVX512VNNI : 0;
    f |= __builtin_cpu_supports("avx512bf16") ? CGE_CPU_AVX512BF16 : 0;
    /* F16C has no name in every compiler's list: it comes with AVX2 on every
     * x86 that has AVX2. */
    f |= (f & CGE_CPU_AVX2) ? CGE_CPU_F16C : 0;
#endif
    return f;
}
