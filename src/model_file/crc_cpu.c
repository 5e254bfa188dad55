/* CRC-32 for the file's checksums (slicing by 8: the header's check covers
 * only metadata, but --verify reads the weights too) and the CPU features a
 * model records and the loader checks. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "model_file/format.h"

/* Computed once (pthread_once), read-only afterwards. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

uint32_t cgm_crc32(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
    crc = ~crc;
    while (n >= 8) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + 4, 4);
        a ^= crc;
        crc = crc_table[7][a & 0xff] ^ crc_table[6][(a >> 8) & 0xff] ^
              crc_table[5][(a >> 16) & 0xff] ^ crc_table[4][a >> 24] ^
              crc_table[3][b & 0xff] ^ crc_table[2][(b >> 8) & 0xff] ^
              crc_table[1][(b >> 16) & 0xff] ^ crc_table[0][b >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

uint32_t cgm_meta_crc(const void *data, uint64_t meta_end)
{
    size_t at = offsetof(cgm_header, meta_crc32);
    uint32_t zero = 0;
    uint32_t c = cgm_crc32(0, data, at);
    c = cgm_crc32(c, &zero, sizeof zero);
    return cgm_crc32(c, (const char *)data + at + 4, (size_t)meta_end - at - 4);
}

static const char *const feature_names[CGE_CPU_NUM_FEATURES] = {
    "sse2", "sse3", "ssse3", "sse4_1", "sse4_2", "popcnt", "avx", "avx2",
    "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512bf16"};

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

/* What the compiler was told it may use everywhere (-march): kernels built
 * without runtime dispatch assume these. Wider instructions (per-ISA clones,
 * oneDNN) are chosen when a model is loaded, on the loading machine. */
uint64_t cgm_cpu_build_features(void)
{
    uint64_t f = 0;
#ifdef __SSE2__
    f |= CGE_CPU_SSE2;
#endif
#ifdef __SSE3__
    f |= CGE_CPU_SSE3;
#endif
#ifdef __SSSE3__
    f |= CGE_CPU_SSSE3;
#endif
#ifdef __SSE4_1__
    f |= CGE_CPU_SSE4_1;
#endif
#ifdef __SSE4_2__
    f |= CGE_CPU_SSE4_2;
#endif
#ifdef __POPCNT__
    f |= CGE_CPU_POPCNT;
#endif
#ifdef __AVX__
    f |= CGE_CPU_AVX;
#endif
#ifdef __AVX2__
    f |= CGE_CPU_AVX2;
#endif
#ifdef __FMA__
    f |= CGE_CPU_FMA;
#endif
#ifdef __F16C__
    f |= CGE_CPU_F16C;
#endif
#ifdef __BMI2__
    f |= CGE_CPU_BMI2;
#endif
#ifdef __AVX512F__
    f |= CGE_CPU_AVX512F;
#endif
#ifdef __AVX512BW__
    f |= CGE_CPU_AVX512BW;
#endif
#ifdef __AVX512VL__
    f |= CGE_CPU_AVX512VL;
#endif
    return f;
}

const char *cgm_arch(void)
{
#if defined(__x86_64__)
    return "x86_64";
#elif defined(__aarch64__)
    return "aarch64";
#elif defined(__i386__)
    return "i386";
#else
    return "unknown";
#endif
}

char *cge_cpu_features_str(uint64_t features, char *buf, size_t size)
{
    if (!buf || !size)
        return buf;
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < 64; i++) {
        if (!(features >> i & 1))
            continue;
        char unknown[16];
        const char *nm = i < CGE_CPU_NUM_FEATURES ? feature_names[i] : NULL;
        if (!nm) {
            snprintf(unknown, sizeof unknown, "bit%d", i);
            nm = unknown;
        }
        int w = snprintf(buf + k, size - k, "%s%s", k ? "," : "", nm);
        if (w < 0 || (size_t)w >= size - k)
            break;
        k += (size_t)w;
    }
    return buf;
}
