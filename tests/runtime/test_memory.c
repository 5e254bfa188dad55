/* Runtime memory: device and host allocations, registration, the pinned-range
 * table, synchronous and asynchronous copies and fills, and their errors. */
#include <stdint.h>
#include <stdlib.h>

#include "rt_test.h"
#include "runtime/device.h"

static int setup(void **state)
{
    *state = rt_make_device(2);
    return 0;
}

static int teardown(void **state)
{
    cge_device_destroy(*state);
    return 0;
}

static void test_alloc_alignment_and_size_zero(void **state)
{
    cge_device *dev = *state;
    size_t sizes[] = {0, 1, 3, 63, 64, 65, 1000, 4096, 1 << 20};
    void *ptrs[sizeof sizes / sizeof sizes[0]];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        assert_int_equal(cge_mem_alloc(dev, sizes[i], &ptrs[i]), CGE_OK);
        assert_non_null(ptrs[i]);
        assert_int_equal((uintptr_t)ptrs[i] % 64, 0);
        memset(ptrs[i], 0xAB, sizes[i]); /* the whole size is usable (ASan checks) */
        assert_true(rt_mem_is_device_alloc(dev, ptrs[i]));
    }
    /* Two 0-byte allocations are distinct live pointers. */
    void *z = NULL;
    assert_int_equal(cge_mem_alloc(dev, 0, &z), CGE_OK);
    assert_ptr_not_equal(z, ptrs[0]);
    assert_int_equal(cge_mem_free(dev, z), CGE_OK);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        assert_int_equal(cge_mem_free(dev, ptrs[i]), CGE_OK);
        assert_false(rt_mem_is_device_alloc(dev, ptrs[i]));
    }
}

static void test_free_unknown_pointer_is_error(void **state)
{
    cge_device *dev = *state;
    int on_stack = 0;
    assert_rt_error_msg(cge_mem_free(dev, &on_stack), CGE_ERR_INVALID_ARG, "cge_mem_free");

    void *p = NULL;
    assert_int_equal(cge_mem_alloc(dev, 128, &p), CGE_OK);
    /* An interior pointer is not an allocation either. */
    assert_rt_error(cge_mem_free(dev, (char *)p + 64), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_mem_free(dev, p), CGE_OK);
    /* Double free is caught, not a crash. */
    assert_rt_error_msg(cge_mem_free(dev, p), CGE_ERR_INVALID_ARG, "not a live device allocation");
    assert_int_equal(cge_mem_free(dev, NULL), CGE_OK);

    /* Device memory is not host memory and the other way round. */
    void *h = NULL;
    assert_int_equal(cge_mem_alloc_host(dev, 32, &h), CGE_OK);
    assert_rt_error(cge_mem_free(dev, h), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_mem_alloc(dev, 32, &p), CGE_OK);
    assert_rt_error(cge_mem_free_host(dev, p), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_mem_free_host(dev, h), CGE_OK);
    assert_int_equal(cge_mem_free(dev, p), CGE_OK);
}

static void test_alloc_argument_errors(void **state)
{
    cge_device *dev = *state;
    void *p = (void *)1;
    assert_rt_error_msg(cge_mem_alloc(NULL, 16, &p), CGE_ERR_INVALID_ARG, "device is NULL");
    assert_null(p);
    assert_rt_error_msg(cge_mem_alloc(dev, 16, NULL), CGE_ERR_INVALID_ARG, "out is NULL");
    assert_rt_error(cge_mem_alloc_host(NULL, 16, &p), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_mem_alloc_host(dev, 16, NULL), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_mem_free(NULL, &p), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_mem_free_host(NULL, &p), CGE_ERR_INVALID_ARG);
    /* Too large to exist: a clean error, not a crash. */
    assert_rt_error(cge_mem_alloc(dev, SIZE_MAX - 8, &p), CGE_ERR_NO_MEMORY);
    assert_null(p);
}

/* Many allocations freed in a scrambled order keep the pointer set exact
 * (its deletion shifts entries; a bug there loses or invents pointers). */
static void test_many_allocations(void **state)
{
    cge_device *dev = *state;
    enum { N = 2000 };
    void **ptrs = calloc(N, sizeof *ptrs);
    assert_non_null(ptrs);
    for (int i = 0; i < N; i++)
        assert_int_equal(cge_mem_alloc(dev, (size_t)(i % 7) * 16, &ptrs[i]), CGE_OK);
    for (int k = 0; k < N; k++) {
        int i = (int)(((int64_t)k * 7919) % N); /* 7919 is prime to N: a permutation */
        assert_int_equal(cge_mem_free(dev, ptrs[i]), CGE_OK);
        assert_rt_error(cge_mem_free(dev, ptrs[i]), CGE_ERR_INVALID_ARG);
        if (k + 1 < N) {
            int j = (int)(((int64_t)(k + 1) * 7919) % N);
            assert_true(rt_mem_is_device_alloc(dev, ptrs[j]));
        }
    }
    free(ptrs);
}

static void test_host_alloc_and_pinned_table(void **state)
{
    cge_device *dev = *state;
    void *h = NULL;
    assert_int_equal(cge_mem_alloc_host(dev, 256, &h), CGE_OK);
    assert_non_null(h);
    assert_int_equal((uintptr_t)h % 64, 0);
    memset(h, 1, 256);
    assert_true(rt_mem_is_pinned(dev, h, 256));
    assert_true(rt_mem_is_pinned(dev, (char *)h + 100, 156));
    assert_false(rt_mem_is_pinned(dev, (char *)h + 100, 157));
    assert_false(rt_mem_is_pinned(dev, (char *)h - 1, 2));
    void *h0 = NULL;
    assert_int_equal(cge_mem_alloc_host(dev, 0, &h0), CGE_OK);
    assert_non_null(h0);
    assert_ptr_not_equal(h0, h);
    assert_int_equal(cge_mem_free_host(dev, h0), CGE_OK);
    assert_int_equal(cge_mem_free_host(dev, h), CGE_OK);
    assert_false(rt_mem_is_pinned(dev, h, 1));
    assert_rt_error_msg(cge_mem_free_host(dev, h), CGE_ERR_INVALID_ARG, "not a live host allocation");
    assert_int_equal(cge_mem_free_host(dev, NULL), CGE_OK);
}

static void test_register_host(void **state)
{
    cge_device *dev = *state;
    char *buf = malloc(1024);
    assert_non_null(buf);
    assert_false(rt_mem_is_pinned(dev, buf, 1));
    assert_int_equal(cge_mem_register_host(dev, buf + 256, 512), CGE_OK);
    assert_true(rt_mem_is_pinned(dev, buf + 256, 512));
    assert_false(rt_mem_is_pinned(dev, buf, 257));
    assert_false(rt_mem_is_pinned(dev, buf + 700, 100));

    /* Overlaps on either side, and containment, are refused. */
    assert_rt_error_msg(cge_mem_register_host(dev, buf + 200, 100), CGE_ERR_EXISTS, "overlap");
    assert_rt_error(cge_mem_register_host(dev, buf + 700, 100), CGE_ERR_EXISTS);
    assert_rt_error(cge_mem_register_host(dev, buf + 300, 10), CGE_ERR_EXISTS);
    assert_rt_error(cge_mem_register_host(dev, buf, 1024), CGE_ERR_EXISTS);
    /* Adjacent ranges are fine. */
    assert_int_equal(cge_mem_register_host(dev, buf, 256), CGE_OK);
    assert_int_equal(cge_mem_register_host(dev, buf + 768, 256), CGE_OK);

    assert_rt_error(cge_mem_register_host(dev, NULL, 16), CGE_ERR_INVALID_ARG);
    assert_rt_error_msg(cge_mem_register_host(dev, buf, 0), CGE_ERR_INVALID_ARG, "0 bytes");
    assert_rt_error(cge_mem_register_host(NULL, buf, 16), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_mem_register_host(dev, (void *)(UINTPTR_MAX - 4), 16), CGE_ERR_INVALID_ARG);

    /* Registered memory is the caller's: free_host refuses it. */
    assert_rt_error_msg(cge_mem_free_host(dev, buf), CGE_ERR_INVALID_ARG, "unregister");
    assert_rt_error(cge_mem_unregister_host(dev, buf + 1), CGE_ERR_NOT_FOUND);
    assert_rt_error(cge_mem_unregister_host(dev, NULL), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_mem_unregister_host(NULL, buf), CGE_ERR_INVALID_ARG);

    assert_int_equal(cge_mem_unregister_host(dev, buf + 256), CGE_OK);
    assert_false(rt_mem_is_pinned(dev, buf + 256, 1));
    assert_rt_error(cge_mem_unregister_host(dev, buf + 256), CGE_ERR_NOT_FOUND);
    assert_int_equal(cge_mem_unregister_host(dev, buf), CGE_OK);
    assert_int_equal(cge_mem_unregister_host(dev, buf + 768), CGE_OK);

    /* Allocated host memory cannot be unregistered. */
    void *h = NULL;
    assert_int_equal(cge_mem_alloc_host(dev, 64, &h), CGE_OK);
    assert_rt_error_msg(cge_mem_unregister_host(dev, h), CGE_ERR_INVALID_ARG, "cge_mem_free_host");
    assert_int_equal(cge_mem_free_host(dev, h), CGE_OK);
    free(buf);
}

static void test_sync_copy_and_fill(void **state)
{
    cge_device *dev = *state;
    enum { N = 1000 };
    float host[N], back[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i * 0.5f;
    float *d1 = NULL, *d2 = NULL;
    assert_int_equal(cge_mem_alloc(dev, sizeof host, (void **)&d1), CGE_OK);
    assert_int_equal(cge_mem_alloc(dev, sizeof host, (void **)&d2), CGE_OK);
    assert_int_equal(cge_memcpy(dev, d1, host, sizeof host, CGE_MEMCPY_HOST_TO_DEVICE), CGE_OK);
    assert_int_equal(cge_memcpy(dev, d2, d1, sizeof host, CGE_MEMCPY_DEVICE_TO_DEVICE), CGE_OK);
    memset(back, 0, sizeof back);
    assert_int_equal(cge_memcpy(dev, back, d2, sizeof host, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    assert_memory_equal(back, host, sizeof host);
    float other[N];
    assert_int_equal(cge_memcpy(dev, other, back, sizeof host, CGE_MEMCPY_HOST_TO_HOST), CGE_OK);
    assert_memory_equal(other, host, sizeof host);

    assert_int_equal(cge_memset(dev, d1, 0x7F, 100), CGE_OK);
    unsigned char bytes[128];
    assert_int_equal(cge_memcpy(dev, bytes, d1, sizeof bytes, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    for (int i = 0; i < 100; i++)
        assert_int_equal(bytes[i], 0x7F);
    assert_memory_equal(bytes + 100, (const char *)host + 100, 28);

    /* Overlapping copies within one buffer behave like memmove. */
    unsigned char ov[16];
    for (int i = 0; i < 16; i++)
        ov[i] = (unsigned char)i;
    assert_int_equal(cge_memcpy(dev, ov + 2, ov, 8, CGE_MEMCPY_HOST_TO_HOST), CGE_OK);
    for (int i = 0; i < 8; i++)
        assert_int_equal(ov[i + 2], i);

    assert_int_equal(cge_mem_free(dev, d1), CGE_OK);
    assert_int_equal(cge_mem_free(dev, d2), CGE_OK);
}

static void test_sync_copy_errors(void **state)
{
    cge_device *dev = *state;
    char a[8], b[8];
    assert_rt_error_msg(cge_memcpy(dev, a, b, 8, (cge_memcpy_kind)7), CGE_ERR_INVALID_ARG, "kind");
    assert_rt_error(cge_memcpy(dev, a, b, 8, (cge_memcpy_kind)-1), CGE_ERR_INVALID_ARG);
    assert_rt_error_msg(cge_memcpy(dev, NULL, b, 8, CGE_MEMCPY_HOST_TO_HOST), CGE_ERR_INVALID_ARG, "dst");
    assert_rt_error_msg(cge_memcpy(dev, a, NULL, 8, CGE_MEMCPY_HOST_TO_HOST), CGE_ERR_INVALID_ARG, "src");
    assert_rt_error(cge_memcpy(NULL, a, b, 8, CGE_MEMCPY_HOST_TO_HOST), CGE_ERR_INVALID_ARG);
    assert_rt_error_msg(cge_memset(dev, NULL, 0, 8), CGE_ERR_INVALID_ARG, "dst");
    assert_rt_error(cge_memset(NULL, a, 0, 8), CGE_ERR_INVALID_ARG);
    /* Zero bytes is a no-op, NULL pointers allowed. */
    assert_int_equal(cge_memcpy(dev, NULL, NULL, 0, CGE_MEMCPY_HOST_TO_HOST), CGE_OK);
    assert_int_equal(cge_memset(dev, NULL, 0, 0), CGE_OK);
}

static void test_async_copy_and_fill(void **state)
{
    cge_device *dev = *state;
    cge_stream *s = rt_make_stream(dev);
    enum { N = 4096 };
    int32_t *h_in = NULL, *h_out = NULL, *d = NULL, *d2 = NULL;
    assert_int_equal(cge_mem_alloc_host(dev, N * sizeof(int32_t), (void **)&h_in), CGE_OK);
    assert_int_equal(cge_mem_alloc_host(dev, N * sizeof(int32_t), (void **)&h_out), CGE_OK);
    assert_int_equal(cge_mem_alloc(dev, N * sizeof(int32_t), (void **)&d), CGE_OK);
    assert_int_equal(cge_mem_alloc(dev, N * sizeof(int32_t), (void **)&d2), CGE_OK);
    for (int i = 0; i < N; i++)
        h_in[i] = i * 3 - 7;
    memset(h_out, 0, N * sizeof(int32_t));

    /* In order on one stream: fill, copy in over part of it, copy across, out. */
    assert_int_equal(cge_memset_async(s, d, 0xFF, N * sizeof(int32_t)), CGE_OK);
    assert_int_equal(cge_memcpy_async(s, d, h_in, (N / 2) * sizeof(int32_t), CGE_MEMCPY_HOST_TO_DEVICE),
                     CGE_OK);
    assert_int_equal(cge_memcpy_async(s, d2, d, N * sizeof(int32_t), CGE_MEMCPY_DEVICE_TO_DEVICE), CGE_OK);
    assert_int_equal(cge_memcpy_async(s, h_out, d2, N * sizeof(int32_t), CGE_MEMCPY_DEVICE_TO_HOST),
                     CGE_OK);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    for (int i = 0; i < N / 2; i++)
        assert_int_equal(h_out[i], i * 3 - 7);
    for (int i = N / 2; i < N; i++)
        assert_int_equal(h_out[i], -1);

    char a[4], b[4];
    assert_rt_error_msg(cge_memcpy_async(NULL, a, b, 4, CGE_MEMCPY_HOST_TO_HOST), CGE_ERR_INVALID_ARG,
                        "stream is NULL");
    assert_rt_error(cge_memcpy_async(s, a, b, 4, (cge_memcpy_kind)9), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_memcpy_async(s, NULL, b, 4, CGE_MEMCPY_HOST_TO_HOST), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_memcpy_async(s, a, NULL, 4, CGE_MEMCPY_HOST_TO_HOST), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_memset_async(NULL, a, 0, 4), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_memset_async(s, NULL, 0, 4), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_memcpy_async(s, NULL, NULL, 0, CGE_MEMCPY_HOST_TO_HOST), CGE_OK);
    assert_int_equal(cge_memset_async(s, NULL, 0, 0), CGE_OK);

    cge_stream_destroy(s);
    assert_int_equal(cge_mem_free(dev, d), CGE_OK);
    assert_int_equal(cge_mem_free(dev, d2), CGE_OK);
    assert_int_equal(cge_mem_free_host(dev, h_in), CGE_OK);
    assert_int_equal(cge_mem_free_host(dev, h_out), CGE_OK);
}

/* Memory left allocated goes with the device (the leak checker of the ASan
 * build would report it otherwise); registered memory stays the caller's. */
static void test_device_destroy_releases_leftovers(void **state)
{
    cge_device *dev = rt_make_device(1);
    void *p = NULL, *h = NULL;
    assert_int_equal(cge_mem_alloc(dev, 1000, &p), CGE_OK);
    assert_int_equal(cge_mem_alloc_host(dev, 1000, &h), CGE_OK);
    char *mine = malloc(64);
    assert_non_null(mine);
    assert_int_equal(cge_mem_register_host(dev, mine, 64), CGE_OK);
    cge_device_destroy(dev);
    mine[0] = 1; /* still ours, still valid */
    free(mine);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_alloc_alignment_and_size_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_unknown_pointer_is_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_argument_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_allocations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_alloc_and_pinned_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_host, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_copy_and_fill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_copy_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_async_copy_and_fill, setup, teardown),
        cmocka_unit_test(test_device_destroy_releases_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
