/* The kernel cache's retired sources and the blocks whose pages go while
 * their address stays: a packed copy is still found by a freed weight's
 * address, a prepare asking another packed form of it gets an error (never a
 * read of the missing bytes), and a shared block keeps its pages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/shared_block.h"
#include "cge/op.h"
#include "ops/kernel_cache.h"

enum { BYTES = 3 << 20 };

static int fills;

static cge_status fill_sum(void *dst, void *user)
{
    fills++;
    const float *src = user;
    ((float *)dst)[0] = src[0] + src[BYTES / sizeof(float) - 1];
    return CGE_OK;
}

/* How many of the pages wholly inside [p, p + n) are resident. */
static size_t resident_pages(const void *p, size_t n)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(uintptr_t)(page - 1);
    size_t count = (hi - lo) / (size_t)page, r = 0;
    unsigned char vec[(BYTES >> 12) + 2];
    assert_true(count <= sizeof vec);
    assert_int_equal(mincore((void *)lo, hi - lo, vec), 0);
    for (size_t i = 0; i < count; i++)
        r += vec[i] & 1;
    return r;
}

static void test_discard_pages_keeps_address(void **state)
{
    (void)state;
    float *w = cge__block_new(NULL, BYTES);
    assert_non_null(w);
    assert_true(cge__block_is_mapped(w));
    memset(w, 1, BYTES);
    assert_true(resident_pages(w, BYTES) > 0);
    /* another holder reads it: its pages stay */
    cge__block_ref(w);
    assert_false(cge__block_discard_pages(w));
    assert_true(resident_pages(w, BYTES) > 0);
    cge__block_unref(w);
    assert_true(cge__block_discard_pages(w));
    assert_int_equal(resident_pages(w, BYTES), 0);
    cge__block_unref(w);   /* the whole range is unmapped */
    /* a small block is heap memory: nothing to give back */
    void *small = cge__block_new(NULL, 4096);
    assert_false(cge__block_is_mapped(small));
    assert_false(cge__block_discard_pages(small));
    cge__block_unref(small);
}

static void test_retired_source_found_never_filled(void **state)
{
    (void)state;
    cge_kernel_cache *c = NULL;
    assert_int_equal(cge__kernel_cache_create(&c), CGE_OK);
    float *w = cge__block_new(NULL, BYTES);
    assert_non_null(w);
    w[0] = 2.0f;
    w[BYTES / sizeof(float) - 1] = 3.0f;
    assert_int_equal(cge__kernel_cache_add_stable(c, w, BYTES), CGE_OK);
    cge_kernel_ctx ctx = {.op_type = "Test", .node_name = "t", .shared = c};
    int64_t key = 1, other = 2;
    void *b1 = NULL, *b2 = NULL, *b3 = NULL;
    fills = 0;
    assert_int_equal(cge_kernel_shared_get(&ctx, w, &key, sizeof key, 64, fill_sum, w, &b1),
                     CGE_OK);
    assert_int_equal(fills, 1);
    assert_true(((float *)b1)[0] == 5.0f);
    /* the weight goes, its address kept */
    assert_int_equal(cge__kernel_cache_retire(c, w, BYTES), CGE_OK);
    assert_true(cge__block_discard_pages(w));
    assert_int_equal(cge_kernel_shared_get(&ctx, w, &key, sizeof key, 64, fill_sum, w, &b2),
                     CGE_OK);
    assert_ptr_equal(b2, b1);
    assert_int_equal(fills, 1);
    /* another packed form would read the missing bytes: refused */
    assert_int_equal(cge_kernel_shared_get(&ctx, w, &other, sizeof other, 64, fill_sum, w, &b3),
                     CGE_ERR_STATE);
    assert_null(b3);
    assert_int_equal(fills, 1);
    assert_non_null(strstr(cge_last_error(), "freed once packed"));
    cge_kernel_shared_release(b1);
    cge_kernel_shared_release(b2);
    /* forgotten before the address goes: nothing is found there again */
    cge__kernel_cache_forget(c, w, BYTES);
    assert_false(cge__kernel_data_is_stable(&ctx, w));
    cge__block_unref(w);
    cge__kernel_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discard_pages_keeps_address),
        cmocka_unit_test(test_retired_source_found_never_filled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
