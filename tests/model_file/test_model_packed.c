/* Packed weights in the model file (format 3): a file saved with them loads
 * without packing again and gives the bits of packing at load; a file packed
 * for other CPU features packs at load instead, with no error; older files
 * still load; a damaged or truncated packed section is an [io] error, never
 * a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "mf_util.h"
#include "model_file/format.h"

/* x [8, 64] -> MatMul W1 + b -> Relu -> MatMul W2 "y"; z [1, 8, 12, 12] ->
 * Conv cw -> Relu "c": a packed GEMM weight (FusedMatMul) twice and a
 * convolution's reordered weight. */
static cge_graph *packed_graph(void)
{
    static float w1[64 * 96], w2[96 * 32], b1[96], cw[16 * 8 * 3 * 3];
    for (int i = 0; i < 64 * 96; i++)
        w1[i] = (float)((i * 7) % 13) * 0.01f - 0.06f;
    for (int i = 0; i < 96 * 32; i++)
        w2[i] = (float)((i * 5) % 11) * 0.02f - 0.1f;
    for (int i = 0; i < 96; i++)
        b1[i] = 0.01f * (float)(i % 7);
    for (int i = 0; i < 16 * 8 * 9; i++)
        cw[i] = (float)((i * 3) % 17) * 0.01f - 0.08f;
    cge_builder *b = cge_builder_create("packed");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(8, 64));
    cge_t h = cge_es_relu(
        b, cge_es_add(b, cge_es_mat_mul(b, x, cge_es_constant(b, "W1", CGE_F32, CGE_SHAPE(64, 96), w1)),
                      cge_es_constant(b, "b1", CGE_F32, CGE_SHAPE(96), b1)));
    cge_es_output(b, cge_es_mat_mul(b, h, cge_es_constant(b, "W2", CGE_F32, CGE_SHAPE(96, 32), w2)),
                  "y");
    cge_t z = cge_es_input(b, "z", CGE_F32, CGE_SHAPE(1, 8, 12, 12));
    int64_t k[2] = {3, 3}, pads[4] = {1, 1, 1, 1}, one[2] = {1, 1};
    cge_t c = cge_es_conv(b, z, cge_es_constant(b, "cw", CGE_F32, CGE_SHAPE(16, 8, 3, 3), cw),
                          CGE_NONE, "NOTSET", one, 2, 1, k, 2, pads, 4, one, 2);
    cge_es_output(b, cge_es_relu(b, c), "c");
    cge_graph *g = NULL;
    if (cge_builder_finish(b, &g) != CGE_OK)
        fail_msg("%s", cge_last_error());
    cge_builder_destroy(b);
    return g;
}

static void *save(bool packed, size_t *size)
{
    cge_graph *g = packed_graph();
    cge_plan *p = mf_compile(g, 1, CGE_OPT_DEFAULT);
    cge_graph_destroy(g);
    cge_model_save_options so = {.opt_level = CGE_OPT_DEFAULT, .pack_weights = packed};
    void *data = NULL;
    assert_int_equal(cge_model_save_buffer(p, &so, &data, size), CGE_OK);
    cge_plan_destroy(p);
    return data;
}

static const cgm_section *section(const void *data, uint32_t kind)
{
    const cgm_header *h = data;
    const cgm_section *tab = (const cgm_section *)((const char *)data + h->section_table);
    for (uint32_t s = 0; s < h->num_sections; s++)
        if (tab[s].kind == kind)
            return &tab[s];
    return NULL;
}

/* Load, run once and return the outputs and how many blocks kernels made. */
static int64_t load_run(const void *data, size_t size, const cge_model_load_options *o,
                        mf_outputs *out)
{
    cge_model *m = NULL;
    if (cge_model_load_buffer(data, size, o, &m) != CGE_OK)
        fail_msg("%s", cge_last_error());
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    int64_t made0 = 0, made1 = 0;
    cge_kernel_shared_counts(&made0, NULL);
    assert_int_equal(cge_session_add_model(s, 1, m), CGE_OK);
    if (mf_run(s, 1, CGE_RUN_PLAN, 7, out) != CGE_OK)
        fail_msg("%s", cge_last_error());
    cge_kernel_shared_counts(&made1, NULL);
    cge_session_destroy(s);
    cge_model_destroy(m);
    return made1 - made0;
}

static void expect_io_error(const void *data, size_t size, const char *words)
{
    cge_model *m = (cge_model *)1;
    assert_int_not_equal(cge_model_load_buffer(data, size, NULL, &m), CGE_OK);
    assert_null(m);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_IO);
    if (words && !strstr(cge_last_error(), words))
        fail_msg("expected '%s' in: %s", words, cge_last_error());
}

static void test_packed_loads_without_packing(void **state)
{
    (void)state;
    size_t n_plain = 0, n_packed = 0;
    void *plain = save(false, &n_plain), *packed = save(true, &n_packed);
    assert_null(section(plain, CGM_SEC_PACKED));
    const cgm_section *ps = section(packed, CGM_SEC_PACKED);
    assert_non_null(ps);
    /* The header and one record per packed weight: W1, W2 (FusedMatMul)
     * at least; the convolution's where oneDNN reorders it. */
    assert_true(ps->count >= 3);
    assert_true(n_packed > n_plain);
    mf_outputs a, b;
    int64_t made_plain = load_run(plain, n_plain, NULL, &a);
    int64_t made_packed = load_run(packed, n_packed, NULL, &b);
    assert_true(made_plain >= (int64_t)ps->count - 1);
    /* Every weight the file holds packed is used as it is. */
    assert_int_equal(made_packed, made_plain - ((int64_t)ps->count - 1));
    mf_assert_same(&a, &b);
    mf_outputs_free(&a);
    mf_outputs_free(&b);
    free(plain);
    free(packed);
}

static void test_other_cpu_packs_at_load(void **state)
{
    (void)state;
    size_t n = 0;
    void *packed = save(true, &n);
    mf_outputs a, b;
    int64_t made_here = load_run(packed, n, NULL, &a);
    /* Told to load for a machine with one more feature: the packed weights
     * were made for another, so the kernels pack them again, with no error. */
    cge_model_load_options o = {.cpu_features = cge_cpu_features() | ((uint64_t)1 << 62)};
    int64_t made_other = load_run(packed, n, &o, &b);
    const cgm_section *ps = section(packed, CGM_SEC_PACKED);
    assert_int_equal(made_other, made_here + ((int64_t)ps->count - 1));
    mf_assert_same(&a, &b);
    mf_outputs_free(&a);
    mf_outputs_free(&b);
    free(packed);
}

static void test_versions(void **state)
{
    (void)state;
    size_t n = 0, np = 0;
    void *plain = save(false, &n), *packed = save(true, &np);
    /* A file without packed weights is what version 2 wrote. */
    ((cgm_header *)plain)->format_version = 2;
    mf_fix_crc(plain, n);
    mf_outputs a;
    load_run(plain, n, NULL, &a);
    mf_outputs_free(&a);
    /* A packed section is not version 2's (nor are bytes after its weights). */
    ((cgm_header *)packed)->format_version = 2;
    mf_fix_crc(packed, np);
    expect_io_error(packed, np, "do not fit the layout");
    free(plain);
    free(packed);
}

static void test_damaged_packed_section(void **state)
{
    (void)state;
    size_t n = 0;
    char *packed = save(true, &n);
    char *copy = malloc(n);
    const cgm_section *ps = section(packed, CGM_SEC_PACKED);
    const cgm_packed *r = (const cgm_packed *)(packed + ps->offset);
    /* A flipped byte in a packed weight: the checksum says so. */
    memcpy(copy, packed, n);
    copy[r[1].data + r[1].bytes / 2] ^= 0x40;
    expect_io_error(copy, n, "packed weights checksum");
    /* Truncated anywhere in the packed region, or by a byte. */
    expect_io_error(packed, n - 1, NULL);
    expect_io_error(packed, (size_t)r[0].src, NULL);
    expect_io_error(packed, (size_t)r[1].data + 8, NULL);
    /* A record pointing outside the region, overlapping the one before, or
     * past the weights (the metadata checksum recomputed, as a crafted file
     * would have it). */
    struct {
        size_t field;
        uint64_t value;
        const char *words;
    } cases[] = {
        {offsetof(cgm_packed, data), (uint64_t)n, "outside its region"},
        {offsetof(cgm_packed, data), r[0].src, "outside its region"},
        {offsetof(cgm_packed, bytes), (uint64_t)n, "outside its region"},
        {offsetof(cgm_packed, src), ((const cgm_header *)packed)->weights_bytes, "past the weights"},
        {offsetof(cgm_packed, key), (uint64_t)1 << 40, "aux"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        memcpy(copy, packed, n);
        memcpy(copy + ps->offset + sizeof(cgm_packed) + cases[c].field, &cases[c].value, 8);
        mf_fix_crc(copy, n);
        expect_io_error(copy, n, cases[c].words);
    }
    /* Every 32-bit word of the section perturbed, the metadata checksum
     * recomputed: an [io] error, or a model that loads and runs. */
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    int errors = 0, ran = 0;
    for (uint64_t off = 0; off < ps->bytes; off += 4) {
        for (int v = 0; v < 3; v++) {
            memcpy(copy, packed, n);
            uint32_t w;
            memcpy(&w, copy + ps->offset + off, 4);
            w = v == 0 ? w ^ 1u : v == 1 ? w + 64u : 0xffffffffu;
            memcpy(copy + ps->offset + off, &w, 4);
            mf_fix_crc(copy, n);
            cge_model *m = NULL;
            cge_model_load_options o = {.weights_check = CGE_WEIGHTS_CHECK_SKIP};
            if (cge_model_load_buffer(copy, n, &o, &m) != CGE_OK) {
                assert_int_equal(cge_last_error_layer(), CGE_LAYER_IO);
                errors++;
                continue;
            }
            assert_int_equal(cge_session_add_model(s, 1, m), CGE_OK);
            mf_outputs out;
            if (mf_run(s, 1, CGE_RUN_PLAN, 3, &out) == CGE_OK)
                ran++;
            mf_outputs_free(&out);
            cge_session_remove_graph(s, 1);
            cge_model_destroy(m);
        }
    }
    assert_true(errors > 0);
    assert_true(ran > 0);
    cge_session_destroy(s);
    free(copy);
    free(packed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_loads_without_packing),
        cmocka_unit_test(test_other_cpu_packs_at_load),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_damaged_packed_section),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
