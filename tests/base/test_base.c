/* Base layer: layered thread-local errors, dtypes, half-precision
 * conversions, shapes (broadcasting, axes, printing) and the string map. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <stdlib.h>

#include "base/strings.h"
#include "base/strmap.h"
#include "cge/types.h"
#include "cge/version.h"

static void test_error_layers(void **state)
{
    (void)state;
    cge_clear_error();
    assert_string_equal(cge_last_error(), "");
    cge_status st = cge_error(CGE_LAYER_META, CGE_ERR_SHAPE, "AddCustom '%s': input 0 is [4,2048]", "add0");
    assert_int_equal(st, CGE_ERR_SHAPE);
    assert_string_equal(cge_last_error(), "[meta] AddCustom 'add0': input 0 is [4,2048]");
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_META);
    assert_int_equal(cge_last_error_status(), CGE_ERR_SHAPE);
    const char *names[] = {"none", "schema", "meta", "converter", "engine", "kernel",
                           "runtime", "io", "graph", "session"};
    for (int l = 0; l < CGE_LAYER_COUNT; l++)
        assert_string_equal(cge_layer_name((cge_layer)l), names[l]);
    assert_string_equal(cge_status_name(CGE_ERR_IO), "CGE_ERR_IO");
    /* Adding context to the current message must not corrupt it. */
    cge_error(CGE_LAYER_SESSION, CGE_ERR_SHAPE, "wrapped: %s", cge_last_error());
    assert_string_equal(cge_last_error(),
                        "[session] wrapped: [meta] AddCustom 'add0': input 0 is [4,2048]");
    cge_clear_error();
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_NONE);
}

static void *other_thread(void *arg)
{
    (void)arg;
    /* A fresh thread sees no error, and its error does not leak out. */
    bool clean = cge_last_error()[0] == '\0';
    cge_error(CGE_LAYER_IO, CGE_ERR_IO, "thread error");
    return clean ? (void *)1 : NULL;
}

static void test_error_thread_local(void **state)
{
    (void)state;
    cge_error(CGE_LAYER_KERNEL, CGE_ERR_INTERNAL, "main error");
    pthread_t t;
    void *res = NULL;
    assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, &res);
    assert_non_null(res);
    assert_string_equal(cge_last_error(), "[kernel] main error");
}

static void test_long_message_truncated(void **state)
{
    (void)state;
    char big[4000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s", big);
    assert_true(strlen(cge_last_error()) < 1024);
    assert_memory_equal(cge_last_error(), "[io] aaa", 8);
}

static void test_dtypes(void **state)
{
    (void)state;
    struct { cge_dtype t; size_t size; const char *name; } cases[] = {
        {CGE_F32, 4, "float32"}, {CGE_F16, 2, "float16"}, {CGE_BF16, 2, "bfloat16"},
        {CGE_F64, 8, "float64"}, {CGE_I8, 1, "int8"},     {CGE_I16, 2, "int16"},
        {CGE_I32, 4, "int32"},   {CGE_I64, 8, "int64"},   {CGE_U8, 1, "uint8"},
        {CGE_U16, 2, "uint16"},  {CGE_U32, 4, "uint32"},  {CGE_U64, 8, "uint64"},
        {CGE_BOOL, 1, "bool"},   {CGE_STRING, 16, "string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(cge_dtype_size(cases[i].t), cases[i].size);
        assert_string_equal(cge_dtype_name(cases[i].t), cases[i].name);
        assert_int_equal(cge_dtype_from_name(cases[i].name), cases[i].t);
        assert_true(cge_dtype_valid(cases[i].t));
    }
    /* ONNX's string (8) is one: a {data, size} element (cge/types.h) */
    assert_int_equal(cge_dtype_size((cge_dtype)8), sizeof(cge_string));
    assert_int_equal(cge_dtype_from_name("str"), CGE_STRING);
    assert_int_equal(cge_dtype_size((cge_dtype)14), 0); /* complex64: not a cge dtype */
    assert_false(cge_dtype_valid((cge_dtype)14));
    assert_false(cge_dtype_is_float(CGE_STRING) || cge_dtype_is_int(CGE_STRING));
    assert_false(CGE_DT_ALL & CGE_DT_STRING); /* no numeric kernel ever sees one */
    assert_false(cge_dtype_valid((cge_dtype)99));
    assert_int_equal(cge_dtype_from_name("f32"), CGE_F32);
    assert_int_equal(cge_dtype_from_name("nope"), CGE_DTYPE_UNDEFINED);
    assert_true(cge_dtype_is_float(CGE_BF16));
    assert_true(cge_dtype_is_int(CGE_U16));
    assert_false(cge_dtype_is_int(CGE_BOOL));
    assert_true(cge_dtype_is_signed(CGE_I8));
    assert_false(cge_dtype_is_signed(CGE_U8));
}

static void test_half_conversions(void **state)
{
    (void)state;
    /* Known bit patterns. */
    assert_int_equal(cge_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(cge_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(cge_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(cge_f32_to_f16(1e6f), 0x7c00);          /* overflow -> inf */
    assert_int_equal(cge_f32_to_f16(5.960464477539063e-08f), 0x0001); /* smallest subnormal */
    assert_int_equal(cge_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);      /* tie -> even */
    assert_int_equal(cge_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);      /* tie -> even (up) */
    assert_true(isnan(cge_f16_to_f32(cge_f32_to_f16(NAN))));
    assert_true(cge_f16_to_f32(0x7c00) == INFINITY);
    assert_true(cge_f16_to_f32(0x0001) == 5.960464477539063e-08f);
    /* Every finite half round-trips through float. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        assert_int_equal(cge_f32_to_f16(cge_f16_to_f32((uint16_t)h)), h);
    }
    assert_int_equal(cge_f32_to_bf16(1.0f), 0x3f80);
    assert_true(cge_bf16_to_f32(0x3f80) == 1.0f);
    assert_int_equal(cge_f32_to_bf16(1.00390625f), 0x3f80);   /* tie -> even */
    assert_true(isnan(cge_bf16_to_f32(cge_f32_to_bf16(NAN))));
}

static void test_shapes(void **state)
{
    (void)state;
    cge_shape s = CGE_SHAPE(8, 2048);
    assert_int_equal(s.rank, 2);
    assert_int_equal(cge_shape_numel(&s), 16384);
    cge_shape sc = CGE_SCALAR;
    assert_int_equal(cge_shape_numel(&sc), 1);
    cge_shape e = CGE_SHAPE(3, 0, 2);
    assert_int_equal(cge_shape_numel(&e), 0);
    cge_shape d = CGE_SHAPE(CGE_DIM_DYNAMIC, 4);
    assert_int_equal(cge_shape_numel(&d), -1);
    assert_false(cge_shape_is_static(&d));
    assert_int_equal(cge_tensor_nbytes(CGE_F32, &s), 65536);
    assert_int_equal(cge_tensor_nbytes(CGE_F32, &d), 0);

    cge_shape out;
    cge_shape a = CGE_SHAPE(2, 1, 4), b = CGE_SHAPE(3, 1);
    assert_int_equal(cge_shape_broadcast(&a, &b, &out), CGE_OK);
    cge_shape want = CGE_SHAPE(2, 3, 4);
    assert_true(cge_shape_equal(&out, &want));
    assert_int_equal(cge_shape_broadcast(&sc, &a, &out), CGE_OK);
    assert_true(cge_shape_equal(&out, &a));
    cge_shape bad = CGE_SHAPE(5);
    assert_int_equal(cge_shape_broadcast(&a, &bad, &out), CGE_ERR_SHAPE);
    assert_int_equal(cge_shape_broadcast(&d, &b, &out), CGE_OK);
    cge_shape dwant = CGE_SHAPE(3, 4);
    assert_true(cge_shape_equal(&out, &dwant)); /* [?,4] vs [3,1]: the known 3 fixes dim 0 */
    cge_shape one = CGE_SHAPE(1, 4);
    assert_int_equal(cge_shape_broadcast(&d, &one, &out), CGE_OK);
    assert_true(cge_shape_equal(&out, &d)); /* [?,4] vs [1,4]: dim 0 stays unknown */

    int64_t st[CGE_MAX_RANK];
    cge_shape_strides(&want, st);
    assert_int_equal(st[0], 12);
    assert_int_equal(st[1], 4);
    assert_int_equal(st[2], 1);

    int32_t ax;
    assert_true(cge_axis_normalize(-1, 3, false, &ax));
    assert_int_equal(ax, 2);
    assert_false(cge_axis_normalize(3, 3, false, &ax));
    assert_true(cge_axis_normalize(-4, 3, true, &ax));
    assert_int_equal(ax, 0);
    assert_false(cge_axis_normalize(-4, 3, false, &ax));

    char buf[CGE_SHAPE_STR_MAX];
    assert_string_equal(cge_shape_str(&s, buf, sizeof buf), "[8,2048]");
    assert_string_equal(cge_shape_str(&d, buf, sizeof buf), "[?,4]");
    assert_string_equal(cge_shape_str(&sc, buf, sizeof buf), "[]");

    int64_t dims[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    assert_int_equal(cge_shape_make(9, dims, &out), CGE_ERR_SHAPE);
    assert_int_equal(cge_shape_make(8, dims, &out), CGE_OK);
    int64_t neg[1] = {CGE_DIM_MIN - 1};   /* -2, -3, ... are symbols */
    assert_int_equal(cge_shape_make(1, neg, &out), CGE_ERR_SHAPE);
    neg[0] = INT64_MIN;
    assert_int_equal(cge_shape_make(1, neg, &out), CGE_ERR_SHAPE);
    cge_shape huge = CGE_SHAPE(INT64_MAX / 2, 4);
    assert_int_equal(cge_shape_numel(&huge), -1);
    assert_int_equal(cge_tensor_nbytes(CGE_F64, &huge), SIZE_MAX);
    /* too large: beyond 2^56 bytes, computed without overflow */
    assert_true(cge_tensor_too_large(CGE_F64, &huge));
    cge_shape sq = CGE_SHAPE((int64_t)1 << 40, (int64_t)1 << 40);
    assert_true(cge_tensor_too_large(CGE_U8, &sq));
    cge_shape wrap = CGE_SHAPE((int64_t)1 << 32, (int64_t)1 << 32, 1); /* 2^64: wraps to 0 */
    assert_true(cge_tensor_too_large(CGE_U8, &wrap));
    cge_shape edge = CGE_SHAPE((int64_t)1 << 27, (int64_t)1 << 27); /* 2^54 elements */
    assert_false(cge_tensor_too_large(CGE_F32, &edge));               /* 2^56 bytes */
    assert_true(cge_tensor_too_large(CGE_F64, &edge));
    cge_shape empty = CGE_SHAPE((int64_t)1 << 40, 0, (int64_t)1 << 40);
    assert_false(cge_tensor_too_large(CGE_F32, &empty));
    cge_shape dyn = CGE_SHAPE(CGE_DIM_DYNAMIC, (int64_t)1 << 40, (int64_t)1 << 40);
    assert_false(cge_tensor_too_large(CGE_F32, &dyn));
    char szbuf[64];
    assert_string_equal(cge_tensor_size_str(CGE_F32, &sq, szbuf, sizeof szbuf),
                        "1.21e+24 elements, 4.84e+24 bytes");
}

/* Symbolic dims: encoding, equality, broadcasting and printing. */
static const char *name_even(int64_t dim, const void *user)
{
    (void)user;
    return cge_dim_symbol_id(dim) % 2 == 0 ? "batch" : NULL;
}

static void test_dim_symbols(void **state)
{
    (void)state;
    const int64_t N = CGE_DIM_SYMBOL(0), M = CGE_DIM_SYMBOL(1);
    assert_int_equal(N, -2);
    assert_int_equal(M, -3);
    assert_int_equal(cge_dim_symbol_id(N), 0);
    assert_int_equal(cge_dim_symbol_id(M), 1);
    assert_int_equal(cge_dim_symbol_id(CGE_DIM_DYNAMIC), -1);
    assert_int_equal(cge_dim_symbol_id(7), -1);
    assert_int_equal(cge_dim_symbol_id(CGE_DIM_MIN), CGE_DIM_MAX_SYMBOLS - 1);
    assert_int_equal(cge_dim_symbol_id(CGE_DIM_MIN - 1), -1);
    assert_true(cge_dim_is_known(0));
    assert_true(cge_dim_is_known(5));
    assert_false(cge_dim_is_known(N));
    assert_false(cge_dim_is_known(CGE_DIM_DYNAMIC));
    assert_true(cge_dim_is_symbol(N));
    assert_false(cge_dim_is_symbol(CGE_DIM_DYNAMIC));
    assert_true(cge_dim_same(N, N));
    assert_true(cge_dim_same(4, 4));
    assert_false(cge_dim_same(N, M));
    assert_false(cge_dim_same(CGE_DIM_DYNAMIC, CGE_DIM_DYNAMIC));
    assert_true(cge_dim_may_equal(N, 4));
    assert_true(cge_dim_may_equal(N, M));
    assert_false(cge_dim_may_equal(3, 4));
    assert_int_equal(cge_dim_merge(N, 4), 4);
    assert_int_equal(cge_dim_merge(N, N), N);
    assert_int_equal(cge_dim_merge(N, M), CGE_DIM_DYNAMIC);
    assert_int_equal(cge_dim_merge(CGE_DIM_DYNAMIC, N), CGE_DIM_DYNAMIC);

    cge_shape out;
    int64_t dims[2] = {N, 16};
    assert_int_equal(cge_shape_make(2, dims, &out), CGE_OK);
    assert_false(cge_shape_is_static(&out));
    assert_int_equal(cge_shape_numel(&out), -1);
    assert_int_equal(cge_tensor_nbytes(CGE_F32, &out), 0);

    /* equal: identical descriptions (-1 matches -1, as before); same: provably equal */
    cge_shape a = CGE_SHAPE(N, 16), b = CGE_SHAPE(N, 16), c = CGE_SHAPE(M, 16);
    cge_shape d1 = CGE_SHAPE(-1, 16), d2 = CGE_SHAPE(-1, 16);
    assert_true(cge_shape_equal(&a, &b));
    assert_true(cge_shape_same(&a, &b));
    assert_false(cge_shape_equal(&a, &c));
    assert_false(cge_shape_same(&a, &c));
    assert_true(cge_shape_equal(&d1, &d2));
    assert_false(cge_shape_same(&d1, &d2));
    assert_false(cge_shape_equal(&a, &d1));

    /* broadcasting */
    cge_shape one = CGE_SHAPE(1, 16), k = CGE_SHAPE(4, 16), row = CGE_SHAPE(16);
    assert_int_equal(cge_shape_broadcast(&a, &b, &out), CGE_OK);
    assert_int_equal(out.dims[0], N);
    assert_int_equal(cge_shape_broadcast(&a, &one, &out), CGE_OK);
    assert_int_equal(out.dims[0], N);
    assert_int_equal(cge_shape_broadcast(&one, &a, &out), CGE_OK);
    assert_int_equal(out.dims[0], N);
    assert_int_equal(cge_shape_broadcast(&a, &row, &out), CGE_OK);
    assert_int_equal(out.rank, 2);
    assert_int_equal(out.dims[0], N);
    assert_int_equal(cge_shape_broadcast(&a, &k, &out), CGE_OK);
    assert_int_equal(out.dims[0], 4);
    assert_int_equal(cge_shape_broadcast(&k, &a, &out), CGE_OK);
    assert_int_equal(out.dims[0], 4);
    assert_int_equal(cge_shape_broadcast(&a, &c, &out), CGE_OK);
    assert_int_equal(out.dims[0], CGE_DIM_DYNAMIC);
    assert_int_equal(cge_shape_broadcast(&a, &d1, &out), CGE_OK);
    assert_int_equal(out.dims[0], CGE_DIM_DYNAMIC);
    assert_int_equal(out.dims[1], 16);
    assert_int_equal(cge_shape_broadcast(&d1, &d2, &out), CGE_OK);
    assert_int_equal(out.dims[0], CGE_DIM_DYNAMIC);

    char buf[CGE_SHAPE_STR_MAX];
    cge_shape mix = CGE_SHAPE(N, -1, M, 3);
    assert_string_equal(cge_shape_str(&mix, buf, sizeof buf), "[s0,?,s1,3]");
    assert_string_equal(cge_shape_str_named(&mix, name_even, NULL, buf, sizeof buf),
                        "[batch,?,s1,3]");
    char tiny[4];
    assert_string_equal(cge_shape_str(&mix, tiny, sizeof tiny), "[s0");
}

static void test_strmap(void **state)
{
    (void)state;
    cge__strmap m;
    cge__strmap_init(&m);
    assert_int_equal(cge__strmap_get(&m, "x"), -1);
    static char keys[5000][16];
    for (int i = 0; i < 5000; i++) {
        snprintf(keys[i], sizeof keys[i], "v%d", i);
        assert_true(cge__strmap_put(&m, keys[i], i));
    }
    for (int i = 0; i < 5000; i++)
        assert_int_equal(cge__strmap_get(&m, keys[i]), i);
    assert_true(cge__strmap_put(&m, "v17", 99));
    assert_int_equal(cge__strmap_get(&m, "v17"), 99);
    assert_int_equal(m.count, 5000);
    assert_int_equal(cge__strmap_get(&m, "v5000"), -1);
    cge__strmap_free(&m);
}

/* The library reports the version it was built as, the same as the header's
 * (a program compares the two to detect a mismatched libcge.so). */
static void test_version(void **state)
{
    (void)state;
    assert_string_equal(cge_version(), CGE_VERSION_STRING);
    assert_int_equal(cge_version_major(), CGE_VERSION_MAJOR);
    assert_int_equal(cge_version_minor(), CGE_VERSION_MINOR);
    assert_int_equal(cge_version_patch(), CGE_VERSION_PATCH);
    /* The string and the numbers the library reports are one version. */
    char parts[32];
    snprintf(parts, sizeof parts, "%d.%d.%d", cge_version_major(), cge_version_minor(),
             cge_version_patch());
    assert_string_equal(parts, cge_version());
}

/* The string store keeps its chunks across resets (a steady state grows
 * nothing); packed string blocks own their bytes; malformed elements are
 * told apart. */
static void test_string_store_and_pack(void **state)
{
    (void)state;
    cge__strstore *st = cge__strstore_create();
    assert_non_null(st);
    size_t cap = 0;
    for (int run = 0; run < 4; run++) {
        cge__strstore_reset(st);
        char *first = NULL;
        for (int i = 0; i < 3000; i++) {
            char *p = cge__strstore_alloc(st, 17, "0123456789abcdefg");
            assert_non_null(p);
            assert_memory_equal(p, "0123456789abcdefg", 17);
            if (!first)
                first = p;
        }
        assert_non_null(cge__strstore_alloc(st, 100000, NULL)); /* larger than a chunk */
        if (run == 0)
            cap = cge__strstore_capacity(st);
        assert_int_equal(cge__strstore_capacity(st), cap);
        assert_memory_equal(first, "0123456789abcdefg", 17);
    }
    cge__strstore_destroy(st);
    cge__strstore_destroy(NULL);

    char src[] = "helloworld";
    cge_string e[3] = {{src, 5}, {NULL, 0}, {src + 5, 5}};
    assert_int_equal(cge__strings_packed_size(e, 3), 3 * sizeof(cge_string) + 10);
    size_t bytes = 0;
    cge_string *packed = cge__strings_pack_dup(e, 3, &bytes);
    assert_non_null(packed);
    memset(src, 'x', sizeof src - 1);
    assert_int_equal(bytes, 3 * sizeof(cge_string) + 10);
    assert_memory_equal(packed[0].data, "hello", 5);
    assert_int_equal(packed[1].size, 0);
    assert_memory_equal(packed[2].data, "world", 5);
    assert_true((const char *)packed[2].data < (const char *)packed + bytes);
    assert_true(cge__string_equal(&packed[0], &(cge_string){"hello", 5}));
    assert_false(cge__string_equal(&packed[0], &packed[2]));
    free(packed);
    cge_string bad[2] = {{NULL, 4}, {"a", -1}};
    assert_int_equal(cge__strings_packed_size(bad, 1), SIZE_MAX);
    assert_int_equal(cge__strings_packed_size(bad + 1, 1), SIZE_MAX);
    assert_null(cge__strings_pack_dup(bad, 2, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_layers),       cmocka_unit_test(test_error_thread_local),
        cmocka_unit_test(test_long_message_truncated), cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_string_store_and_pack),
        cmocka_unit_test(test_half_conversions),   cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_strmap),            cmocka_unit_test(test_dim_symbols),
        cmocka_unit_test(test_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
