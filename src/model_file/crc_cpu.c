/* CRC-32 for the file's checksums (carry-less multiplication folding where
 * the CPU has PCLMULQDQ, slicing by 8 elsewhere: the loader reads every
 * weight byte once by default) and the CPU features a model records and the
 * loader checks. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && !defined(CGE_NO_PCLMUL)
#include <immintrin.h>
#define CGE_HAVE_PCLMUL_PATH 1
#endif

#include "model_file/format.h"

/* Computed once (pthread_once), read-only afterwards. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

#ifdef CGE_HAVE_PCLMUL_PATH
/* Folding constants (below) and whether this CPU can use them. */
static uint64_t fold512[2], fold128[2];
static bool use_pclmul;

/* x^k mod P for the CRC-32 polynomial, in the normal bit order (bit j is the
 * coefficient of x^j). */
static uint32_t xpow_mod(uint32_t k)
{
    uint32_t r = 1;
    while (k--)
        r = (r << 1) ^ (r & 0x80000000u ? 0x04C11DB7u : 0);
    return r;
}

static uint32_t rev32(uint32_t v)
{
    uint32_t r = 0;
    for (int i = 0; i < 32; i++)
        r |= (v >> i & 1) << (31 - i);
    return r;
}

/* The multipliers that move a 128-bit block F bits further down the message.
 * In the reflected order a register's low half holds the higher powers (H)
 * and the high half the lower (L): H * x^(F+64) + L * x^F ≡ H * k0 + L * k1.
 * A reflected carry-less product carries one extra factor x, hence F+63 and
 * F-1; a constant of degree < 32 sits in bits 32..63 once reflected. Derived
 * here rather than copied, and checked against the table path by the tests. */
static void fold_constants(uint32_t F, uint64_t k[2])
{
    k[0] = (uint64_t)rev32(xpow_mod(F + 63)) << 32;
    k[1] = (uint64_t)rev32(xpow_mod(F - 1)) << 32;
}
#endif

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
#ifdef CGE_HAVE_PCLMUL_PATH
    fold_constants(512, fold512);
    fold_constants(128, fold128);
    __builtin_cpu_init();
    use_pclmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
}

/* The raw register (no inversion before or after), slicing by 8. */
static uint32_t crc_table_raw(uint32_t crc, const unsigned char *p, size_t n)
{
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
    return crc;
}

#ifdef CGE_HAVE_PCLMUL_PATH
__attribute__((target("pclmul,sse4.1"))) static inline __m128i fold(__m128i v, __m128i k,
                                                                    __m128i next)
{
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(v, k, 0x00),
                                       _mm_clmulepi64_si128(v, k, 0x11)),
                         next);
}

/* Raw register over n >= 64 bytes: four 128-bit lanes folded 512 bits at a
 * time (independent chains keep the multiplier busy), merged into one, then
 * 16 bytes at a time; the last register and the tail go through the table
 * (the register's 16 bytes with a zero start are its remainder mod P). */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_pclmul_raw(uint32_t crc,
                                                                       const unsigned char *p,
                                                                       size_t n)
{
    const __m128i k512 = _mm_set_epi64x((long long)fold512[1], (long long)fold512[0]);
    const __m128i k128 = _mm_set_epi64x((long long)fold128[1], (long long)fold128[0]);
    __m128i x0 = _mm_loadu_si128((const __m128i *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)crc));
    p += 64;
    n -= 64;
    while (n >= 64) {
        x0 = fold(x0, k512, _mm_loadu_si128((const __m128i *)p));
        x1 = fold(x1, k512, _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = fold(x2, k512, _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = fold(x3, k512, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    x1 = fold(x0, k128, x1);
    x2 = fold(x1, k128, x2);
    x3 = fold(x2, k128, x3);
    while (n >= 16) {
        x3 = fold(x3, k128, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    unsigned char last[16];
    _mm_storeu_si128((__m128i *)last, x3);
    return crc_table_raw(crc_table_raw(0, last, 16), p, n);
}
#endif

uint32_t cgm_crc32(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
#ifdef CGE_HAVE_PCLMUL_PATH
    if (use_pclmul && n >= 64)
        return ~crc_pclmul_raw(~crc, p, n);
#endif
    return ~crc_table_raw(~crc, p, n);
}

uint32_t cgm_crc32_table(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&crc_once, crc_init);
    return ~crc_table_raw(~crc, data, n);
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

/* cge_cpu_features itself lives in src/base/cpu_features.c, where the
 * kernels reach it too. */

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
