/* cge_cpu_features (include/cge/model_file.h): the CPU features this machine
 * has, in the base layer so that the kernels' own checks (bf16, VNNI) and the
 * model file's requirements read the one answer.
 *
 * CGE_CPU_ISA=generic|avx2|avx512 caps the answer: the process then acts as
 * a machine without the features above the cap (avx2: no AVX-512 of any kind;
 * generic: no AVX at all). It is how an AVX-512 machine tests the AVX2 and
 * portable kernels, and how a user pins one code path. Any other value is
 * ignored (the full set). The answer is read once, at the first call: kernels
 * ask on hot paths. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cge/model_file.h"

static uint64_t detect(void)
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
    const char *cap = getenv("CGE_CPU_ISA");
    const uint64_t avx512 = CGE_CPU_AVX512F | CGE_CPU_AVX512BW | CGE_CPU_AVX512VL |
                            CGE_CPU_AVX512VNNI | CGE_CPU_AVX512BF16;
    if (cap && strcmp(cap, "avx2") == 0)
        f &= ~avx512;
    else if (cap && strcmp(cap, "generic") == 0)
        f &= ~(avx512 | CGE_CPU_AVX | CGE_CPU_AVX2 | CGE_CPU_FMA | CGE_CPU_F16C | CGE_CPU_BMI2);
    return f;
}

uint64_t cge_cpu_features(void)
{
    /* Every thread computes the same value, so a race only repeats the work. */
    static _Atomic uint64_t known;
    uint64_t f = known;
    if (!f) {
        f = detect() | (1ull << 63); /* the top bit marks "known" (no feature uses it) */
        known = f;
    }
    return f & ~(1ull << 63);
}
