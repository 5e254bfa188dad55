/* The weights' checksum: the fast CRC-32 path against the table-driven one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "model_file/format.h"

/* The weights' CRC-32 (carry-less multiplication where the CPU has it) is the
 * table-driven one: the check value, every length up to a few folds at every
 * alignment, continued checksums, and a large buffer. */
static void test_crc32_fast_path(void **state)
{
    (void)state;
    assert_int_equal(cgm_crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(cgm_crc32_table(0, "123456789", 9), 0xCBF43926u);
    size_t big = (size_t)3 << 20;
    unsigned char *b = malloc(big + 64);
    uint32_t seed = 99;
    for (size_t i = 0; i < big + 64; i++) {
        seed = seed * 1664525u + 1013904223u;
        b[i] = (unsigned char)(seed >> 24);
    }
    for (size_t n = 0; n <= 300; n++)
        for (size_t off = 0; off < 16; off++) {
            uint32_t start = (uint32_t)(n * 2654435761u);
            if (cgm_crc32(start, b + off, n) != cgm_crc32_table(start, b + off, n))
                fail_msg("crc32 of %zu bytes at offset %zu differs", n, off);
        }
    for (size_t n = big - 70; n <= big; n += 7)
        assert_int_equal(cgm_crc32(0, b + 3, n), cgm_crc32_table(0, b + 3, n));
    uint32_t whole = cgm_crc32(0, b, big), parts = cgm_crc32(cgm_crc32(0, b, 1000), b + 1000,
                                                             big - 1000);
    assert_int_equal(whole, parts);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32_fast_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
