/* Damaged model files: truncations at every section boundary, every header
 * word and section-table word perturbed, every word of every record perturbed
 * (with the checksum recomputed, as a crafted file would have it), random byte
 * flips. Each is an [io] error, or — when the change is harmless — a model
 * that loads and runs; never a crash or a sanitizer report. The symbolic
 * model (format 2: a shape program section, symbolic dims) gets the same. */
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

typedef struct tally {
    int errors, loaded, ran;
} tally;

static cge_session *session;

/* Load with `opts` (and, if it loads and is small, run) one variant. */
static void try_variant_with(const void *data, size_t size, const cge_model_load_options *opts,
                             tally *t)
{
    cge_model *m = (cge_model *)1;
    cge_status st = cge_model_load_buffer(data, size, opts, &m);
    if (st) {
        if (cge_last_error_layer() != CGE_LAYER_IO)
            fail_msg("not an [io] error: %s", cge_last_error());
        assert_null(m);
        t->errors++;
        return;
    }
    t->loaded++;
    if (cge_plan_arena_bytes(cge_model_plan(m)) <= ((size_t)64 << 20) &&
        cge_session_add_model(session, 1, m) == CGE_OK) {
        mf_outputs o;
        if (mf_run(session, 1, CGE_RUN_PLAN, 5, &o) == CGE_OK)
            t->ran++;
        mf_outputs_free(&o);
        cge_session_remove_graph(session, 1);
    }
    cge_model_destroy(m);
}

static void try_variant(const void *data, size_t size, tally *t)
{
    try_variant_with(data, size, NULL, t);
}

static void *saved(cge_graph *g, size_t *size)
{
    /* A graph with symbolic dims saves its symbolic plan and shape program. */
    cge_tensor_desc d;
    cge_graph_get_desc(g, cge_graph_input(g, 0), &d);
    cge_plan *p = cge_shape_is_static(&d.shape) ? mf_compile(g, 2, CGE_OPT_DEFAULT)
                                                : mf_compile_symbolic(g);
    void *data = NULL;
    assert_int_equal(cge_model_save_buffer(p, NULL, &data, size), CGE_OK);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
    return data;
}

static int setup(void **state)
{
    (void)state;
    return cge_session_create(NULL, &session) == CGE_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cge_session_destroy(session);
    return 0;
}

static void test_truncated_at_every_boundary(void **state)
{
    (void)state;
    for (int symbolic = 0; symbolic < 2; symbolic++) {
    size_t size;
    char *data = saved(symbolic ? mf_symbolic_graph(0, 0) : mf_attr_graph(), &size);
    cgm_header h;
    memcpy(&h, data, sizeof h);
    size_t cuts[256];
    int n = 0;
    size_t fixed[] = {0, 1, 7, 8, 64, sizeof h - 1, sizeof h, h.section_table,
                      h.section_table + 16, h.weights_offset - 1, h.weights_offset,
                      h.weights_offset + 1, size - 1};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        cuts[n++] = fixed[i];
    const cgm_section *tab = (const cgm_section *)(data + h.section_table);
    for (uint32_t s = 0; s < h.num_sections; s++) {
        size_t ends[2] = {tab[s].offset, tab[s].offset + tab[s].bytes};
        for (int e = 0; e < 2; e++)
            for (int d = -1; d <= 1; d++)
                if (n < 256 && ends[e] + (size_t)d < size)
                    cuts[n++] = ends[e] + (size_t)d;
    }
    tally t = {0};
    for (int i = 0; i < n; i++) {
        char *copy = malloc(cuts[i] + 1);
        memcpy(copy, data, cuts[i]);
        try_variant(copy, cuts[i], &t);
        /* A crafted header that claims the truncated size is still refused. */
        if (cuts[i] >= sizeof h) {
            cgm_header c;
            memcpy(&c, copy, sizeof c);
            c.file_bytes = cuts[i];
            memcpy(copy, &c, sizeof c);
            mf_fix_crc(copy, cuts[i]);
            try_variant(copy, cuts[i], &t);
        }
        free(copy);
    }
    assert_int_equal(t.loaded, 0);
    assert_true(t.errors >= n);
    free(data);
    }
}

static const uint32_t patterns[] = {1, 0x80000000u, 0xffffffffu, 0x7fffffffu, 0x10, 0x100};

/* Perturb each 4-byte word of [lo, hi) in several ways, with and without a
 * recomputed checksum. */
static void perturb_words(const char *data, size_t size, size_t lo, size_t hi, bool fix_crc,
                          tally *t)
{
    char *copy = malloc(size);
    for (size_t off = lo; off + 4 <= hi; off += 4) {
        for (size_t k = 0; k < sizeof patterns / sizeof patterns[0]; k++) {
            memcpy(copy, data, size);
            uint32_t w;
            memcpy(&w, copy + off, 4);
            uint32_t nw[3] = {w ^ patterns[k], w + patterns[k], patterns[k]};
            for (int v = 0; v < 3; v++) {
                if (nw[v] == w)
                    continue;
                memcpy(copy + off, &nw[v], 4);
                if (fix_crc)
                    mf_fix_crc(copy, size);
                try_variant(copy, size, t);
                memcpy(copy, data, size);
            }
        }
    }
    free(copy);
}

static void test_header_fields(void **state)
{
    (void)state;
    size_t size;
    char *data = saved(mf_mixed_graph(6), &size);
    tally t = {0};
    /* Without a matching checksum every change is refused. */
    perturb_words(data, size, 0, sizeof(cgm_header), false, &t);
    assert_int_equal(t.loaded, 0);
    /* With one, only harmless fields (the compiling machine's features, the
     * engine version, reserved bytes) may load. */
    tally c = {0};
    perturb_words(data, size, 0, sizeof(cgm_header), true, &c);
    assert_true(c.errors > 0);
    assert_true(c.loaded < c.errors);
    free(data);
}

static void test_section_table_entries(void **state)
{
    (void)state;
    size_t size;
    char *data = saved(mf_attr_graph(), &size);
    cgm_header h;
    memcpy(&h, data, sizeof h);
    tally t = {0};
    perturb_words(data, size, h.section_table,
                  h.section_table + sizeof(cgm_section) * h.num_sections, true, &t);
    assert_true(t.errors > 0);
    free(data);
}

/* Every word of every record of every section, checksum recomputed. */
static void test_every_record_word(void **state)
{
    (void)state;
    for (int symbolic = 0; symbolic < 2; symbolic++) {
    size_t size;
    char *data = saved(symbolic ? mf_symbolic_graph(0, 0) : mf_attr_graph(), &size);
    cgm_header h;
    memcpy(&h, data, sizeof h);
    const cgm_section *tab = (const cgm_section *)(data + h.section_table);
    tally total = {0};
    for (uint32_t s = 0; s < h.num_sections; s++) {
        if (tab[s].kind == CGM_SEC_STRINGS || tab[s].kind == CGM_SEC_AUX)
            continue;   /* bytes, covered by the random flips below */
        tally t = {0};
        perturb_words(data, size, tab[s].offset, tab[s].offset + tab[s].bytes, true, &t);
        total.errors += t.errors;
        total.loaded += t.loaded;
        total.ran += t.ran;
    }
    print_message("record perturbations: %d refused, %d loaded, %d ran\n", total.errors,
                  total.loaded, total.ran);
    /* Most changes to the plan's records are caught (statistics, lifetimes
     * and padding are harmless); what loads, runs. */
    assert_true(total.errors > total.loaded);
    free(data);
    }
}

/* A crafted value whose size overflows (each dim within the loader's limit)
 * is refused as too large, not as a size of 18446744073709551615 bytes. */
static void test_value_too_large(void **state)
{
    (void)state;
    size_t size;
    char *data = saved(mf_mixed_graph(4), &size);
    cgm_header h;
    memcpy(&h, data, sizeof h);
    const cgm_section *tab = (const cgm_section *)(data + h.section_table);
    const cgm_section *vs = NULL;
    for (uint32_t s = 0; s < h.num_sections; s++)
        if (tab[s].kind == CGM_SEC_VALUES)
            vs = &tab[s];
    assert_non_null(vs);
    cgm_value *v = (cgm_value *)(data + vs->offset);
    v->rank = 3;
    v->dims[0] = v->dims[1] = v->dims[2] = (int64_t)1 << 32;
    mf_fix_crc(data, size);
    cge_model *m = NULL;
    assert_int_not_equal(cge_model_load_buffer(data, size, NULL, &m), CGE_OK);
    assert_null(m);
    if (cge_last_error_layer() != CGE_LAYER_IO || !strstr(cge_last_error(), "too large"))
        fail_msg("unexpected message: %s", cge_last_error());
    free(data);
}

static void test_random_flips(void **state)
{
    (void)state;
    for (int symbolic = 0; symbolic < 2; symbolic++) {
    size_t size;
    char *data = saved(symbolic ? mf_symbolic_graph(0, 0) : mf_attr_graph(), &size);
    cgm_header h;
    memcpy(&h, data, sizeof h);
    char *copy = malloc(size);
    uint32_t seed = 12345;
    tally plain = {0}, crafted = {0}, weights = {0};
    for (int it = 0; it < 1500; it++) {
        memcpy(copy, data, size);
        int flips = 1 + it % 4;
        bool in_weights = it % 5 == 4 && h.weights_bytes;
        for (int f = 0; f < flips; f++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = in_weights ? h.weights_offset + (seed >> 4) % h.weights_bytes
                                   : (seed >> 4) % h.weights_offset;
            copy[at] ^= (char)(1u << (seed >> 28 & 7));
        }
        if (in_weights) {
            /* Damaged weights are refused by default; trusted (SKIP), they
             * load and run: wrong numbers, never a wrong address. */
            cge_model *m = NULL;
            assert_int_not_equal(cge_model_load_buffer(copy, size, NULL, &m), CGE_OK);
            assert_int_equal(cge_last_error_layer(), CGE_LAYER_IO);
            assert_non_null(strstr(cge_last_error(), "weights checksum mismatch"));
            cge_model_load_options skip = {.weights_check = CGE_WEIGHTS_CHECK_SKIP};
            try_variant_with(copy, size, &skip, &weights);
            continue;
        }
        try_variant(copy, size, &plain);
        mf_fix_crc(copy, size);
        try_variant(copy, size, &crafted);
    }
    assert_int_equal(plain.loaded, 0);
    assert_true(crafted.errors > 0);
    print_message("random flips%s: %d refused, %d loaded (crafted); weights: %d loaded\n",
                  symbolic ? " (symbolic plan)" : "", crafted.errors, crafted.loaded,
                  weights.loaded);
    free(copy);
    free(data);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_at_every_boundary),
        cmocka_unit_test(test_header_fields),
        cmocka_unit_test(test_section_table_entries),
        cmocka_unit_test(test_every_record_word),
        cmocka_unit_test(test_value_too_large),
        cmocka_unit_test(test_random_flips),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
