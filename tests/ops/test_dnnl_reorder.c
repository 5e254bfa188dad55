/* cge's oneDNN reorders (src/ops/dnnl_common.c) take their scratchpad from
 * the caller: a reorder primitive made in oneDNN's library mode holds a
 * scratchpad of its own for as long as it lives, and a Winograd weights
 * transform's is as large as the transformed W, which every Winograd
 * convolution kept resident after packing its weights once. Checked on the
 * weights layout of oneDNN's own Winograd primitive (64 -> 64 channels, 3x3,
 * a 16x16 map): the reorder is in user mode and needs a scratchpad, runs
 * through cge__dnnl_run_reorder, and writes the same bytes as oneDNN's
 * library-mode reorder of the same W. Skipped without oneDNN or where it
 * has no Winograd kernel (not AVX-512). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef CGE_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

#include "ops/dnnl_common.h"

enum { CH = 64, MAP = 16 };

/* The weights layout oneDNN's Winograd convolution chose (*pd keeps it). */
static int winograd_weights(dnnl_engine_t e, dnnl_primitive_desc_t *pd,
                            const dnnl_memory_desc_t **wmd)
{
    dnnl_dims_t sd = {1, CH, MAP, MAP}, wd = {CH, CH, 3, 3}, st = {1, 1}, pad = {1, 1};
    dnnl_memory_desc_t s, w, d;
    dnnl_convolution_desc_t cd;
    if (dnnl_memory_desc_init_by_tag(&s, 4, sd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&d, 4, sd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                           dnnl_convolution_winograd, &s, &w, NULL, &d, st, pad,
                                           pad) ||
        dnnl_primitive_desc_create(pd, &cd, NULL, e, NULL))
        return 0;
    *wmd = dnnl_primitive_desc_query_md(*pd, dnnl_query_weights_md, 0);
    return *wmd != NULL;
}

static void test_winograd_weights_reorder_uses_caller_scratch(void **state)
{
    (void)state;
    dnnl_engine_t e = NULL;
    dnnl_stream_t s = NULL;
    dnnl_primitive_desc_t conv = NULL;
    const dnnl_memory_desc_t *wino = NULL;
    assert_int_equal(dnnl_engine_create(&e, dnnl_cpu, 0), dnnl_success);
    assert_int_equal(dnnl_stream_create(&s, e, dnnl_stream_default_flags), dnnl_success);
    if (!winograd_weights(e, &conv, &wino)) {
        dnnl_stream_destroy(s);
        dnnl_engine_destroy(e);
        skip(); /* no Winograd kernel on this machine */
    }
    dnnl_dims_t wd = {CH, CH, 3, 3};
    dnnl_memory_desc_t plain;
    assert_int_equal(dnnl_memory_desc_init_by_tag(&plain, 4, wd, dnnl_f32, dnnl_oihw),
                     dnnl_success);

    dnnl_primitive_t ours = NULL, theirs = NULL;
    assert_true(cge__dnnl_make_reorder(e, &plain, wino, &ours));
    const_dnnl_primitive_desc_t opd = NULL;
    const_dnnl_primitive_attr_t attr = NULL;
    dnnl_scratchpad_mode_t mode = dnnl_scratchpad_mode_library;
    assert_int_equal(dnnl_primitive_get_primitive_desc(ours, &opd), dnnl_success);
    assert_int_equal(dnnl_primitive_desc_get_attr(opd, &attr), dnnl_success);
    assert_int_equal(dnnl_primitive_attr_get_scratchpad_mode(attr, &mode), dnnl_success);
    assert_int_equal(mode, dnnl_scratchpad_mode_user);
    /* the transform works in a scratchpad: the caller's now */
    assert_true(cge__dnnl_reorder_scratch_size(ours) > 0);

    /* oneDNN's own reorder (library mode) of the same W, for the bytes */
    dnnl_primitive_desc_t rpd = NULL;
    assert_int_equal(dnnl_reorder_primitive_desc_create(&rpd, &plain, e, wino, e, NULL),
                     dnnl_success);
    assert_int_equal(dnnl_primitive_create(&theirs, rpd), dnnl_success);
    dnnl_primitive_desc_destroy(rpd);

    size_t n = (size_t)CH * CH * 9, bytes = dnnl_memory_desc_get_size(wino);
    float *w = malloc(n * sizeof *w);
    unsigned char *a = calloc(1, bytes), *b = calloc(1, bytes);
    assert_non_null(w);
    assert_non_null(a);
    assert_non_null(b);
    uint32_t r = 12345;
    for (size_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        w[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
    }
    dnnl_memory_t src = NULL, to_a = NULL, to_b = NULL;
    assert_int_equal(dnnl_memory_create(&src, &plain, e, w), dnnl_success);
    assert_int_equal(dnnl_memory_create(&to_a, wino, e, a), dnnl_success);
    assert_int_equal(dnnl_memory_create(&to_b, wino, e, b), dnnl_success);
    assert_true(cge__dnnl_run_reorder(s, ours, src, to_a));
    assert_true(cge__dnnl_run_reorder(s, theirs, src, to_b));
    assert_int_equal(dnnl_stream_wait(s), dnnl_success);
    assert_memory_equal(a, b, bytes);
    /* not all zeros: the transform ran */
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; i++)
        nonzero += a[i] != 0;
    assert_true(nonzero > bytes / 2);

    dnnl_memory_destroy(src);
    dnnl_memory_destroy(to_a);
    dnnl_memory_destroy(to_b);
    free(w);
    free(a);
    free(b);
    dnnl_primitive_destroy(ours);
    dnnl_primitive_destroy(theirs);
    dnnl_primitive_desc_destroy(conv);
    dnnl_stream_destroy(s);
    dnnl_engine_destroy(e);
}

/* A layout reorder of activations (NCHW -> NHWC) needs no scratchpad, so
 * the run-time reorders of convolutions allocate nothing per run. */
static void test_activation_reorder_needs_no_scratch(void **state)
{
    (void)state;
    dnnl_engine_t e = NULL;
    assert_int_equal(dnnl_engine_create(&e, dnnl_cpu, 0), dnnl_success);
    dnnl_dims_t sd = {2, 37, 5, 7};
    dnnl_memory_desc_t nchw, nhwc;
    assert_int_equal(dnnl_memory_desc_init_by_tag(&nchw, 4, sd, dnnl_f32, dnnl_nchw),
                     dnnl_success);
    assert_int_equal(dnnl_memory_desc_init_by_tag(&nhwc, 4, sd, dnnl_f32, dnnl_nhwc),
                     dnnl_success);
    dnnl_primitive_t r = NULL;
    assert_true(cge__dnnl_make_reorder(e, &nchw, &nhwc, &r));
    assert_int_equal(cge__dnnl_reorder_scratch_size(r), 0);
    dnnl_primitive_destroy(r);
    dnnl_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_winograd_weights_reorder_uses_caller_scratch),
        cmocka_unit_test(test_activation_reorder_needs_no_scratch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

static void test_no_onednn(void **state)
{
    (void)state;
    skip(); /* built without oneDNN: nothing to check */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_onednn)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
