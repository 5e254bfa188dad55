/* What a loaded model promises about its file: the weights' checksum checked
 * by default (a swapped weights section is an [io] error; CGE_WEIGHTS_CHECK_SKIP
 * and CGE_VERIFY_WEIGHTS=0 trust it), and a file rewritten in place after
 * loading cannot reach the values kernels read as numbers of elements (Pad's
 * pads, shapes): runs give the loaded model's results. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "mf_util.h"
#include "model_file/format.h"

static char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *d = malloc(*size);
    assert_int_equal(fread(d, 1, *size, f), *size);
    fclose(f);
    return d;
}

/* Overwrites bytes of the file in place (the same inode, as `cp` or an
 * editor writing over it does), without truncating it. */
static void write_at(const char *path, uint64_t off, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, data, n, (off_t)off), (ssize_t)n);
    close(fd);
}

static void expect_io(cge_status st, const char *needle)
{
    assert_int_not_equal(st, CGE_OK);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_IO);
    if (!strstr(cge_last_error(), needle))
        fail_msg("expected '%s' in: %s", needle, cge_last_error());
}

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

/* Plan value read by input `k` of the first step running `op`. */
static const cge_plan_value *step_input(const cge_plan *p, const char *op, int k)
{
    const cge_plan_step *s = cge_plan_steps(p);
    for (int32_t t = 0; t < cge_plan_num_steps(p); t++)
        if (!strcmp(cge_node_op_type(s[t].node), op) && s[t].num_inputs > k &&
            s[t].inputs[k] >= 0)
            return &cge_plan_values(p)[s[t].inputs[k]];
    fail_msg("no %s step", op);
    return NULL;
}

static void test_weights_checked_by_default(void **state)
{
    (void)state;
    cge_graph *g = mf_attr_graph();
    cge_plan *p = mf_compile(g, 1, CGE_OPT_DEFAULT);
    cge_graph_destroy(g);
    char path[512], swapped[512];
    mf_temp_path(path, sizeof path, ".cgm");
    mf_temp_path(swapped, sizeof swapped, ".cgm");
    assert_int_equal(cge_model_save(p, path, NULL), CGE_OK);
    cge_plan_destroy(p);
    cge_model *m = NULL;
    cge_model_info info;
    assert_int_equal(cge_model_load(path, NULL, &m), CGE_OK);
    assert_int_equal(cge_model_get_info(m, &info), CGE_OK);
    assert_true(info.weights_verified);
    /* Other bytes of the same length in the weights section, the metadata
     * and its checksum untouched (the largest float constant, the
     * convolution's weights, reversed: changed shape constants would fail
     * meta instead): refused, naming the file and the checksum. */
    const cge_plan *lp = cge_model_plan(m);
    const cge_plan_value *cw = NULL;
    for (int32_t v = 0; v < cge_plan_num_values(lp); v++) {
        const cge_plan_value *x = &cge_plan_values(lp)[v];
        if (x->storage == CGE_STORAGE_CONSTANT && x->dtype == CGE_F32 &&
            (!cw || x->bytes > cw->bytes))
            cw = x;
    }
    assert_non_null(cw);
    assert_true(cw->bytes >= 72 * sizeof(float));
    size_t size;
    char *d = read_all(path, &size);
    char *w = d + info.weights_offset + cw->offset;
    for (size_t i = 0; i < cw->bytes / 2; i++) {
        char t = w[i];
        w[i] = w[cw->bytes - 1 - i];
        w[cw->bytes - 1 - i] = t;
    }
    cge_model_destroy(m);
    assert_int_equal(mf_write_file(swapped, d, size), 0);
    m = (cge_model *)1;
    expect_io(cge_model_load(swapped, NULL, &m), "weights checksum mismatch");
    assert_null(m);
    assert_non_null(strstr(cge_last_error(), swapped));
    expect_io(cge_model_load_buffer(d, size, NULL, &m), "weights checksum mismatch");
    /* Trusted on request: it loads (and would compute with those weights). */
    cge_model_load_options skip = {.weights_check = CGE_WEIGHTS_CHECK_SKIP};
    assert_int_equal(cge_model_load(swapped, &skip, &m), CGE_OK);
    assert_int_equal(cge_model_get_info(m, &info), CGE_OK);
    assert_false(info.weights_verified);
    cge_model_destroy(m);
    /* CGE_VERIFY_WEIGHTS=0 trusts by default; an explicit VERIFY still checks. */
    setenv("CGE_VERIFY_WEIGHTS", "0", 1);
    assert_int_equal(cge_model_load(swapped, NULL, &m), CGE_OK);
    cge_model_destroy(m);
    cge_model_load_options verify = {.weights_check = CGE_WEIGHTS_CHECK_VERIFY};
    expect_io(cge_model_load(swapped, &verify, &m), "weights checksum mismatch");
    setenv("CGE_VERIFY_WEIGHTS", "1", 1);
    expect_io(cge_model_load(swapped, NULL, &m), "weights checksum mismatch");
    unsetenv("CGE_VERIFY_WEIGHTS");
    free(d);
    unlink(path);
    unlink(swapped);
}

static void run_all_modes(cge_session *s, uint32_t id, mf_outputs out[3])
{
    static const cge_run_mode modes[3] = {CGE_RUN_PLAN, CGE_RUN_REPLAY, CGE_RUN_EAGER};
    for (int k = 0; k < 3; k++)
        if (mf_run(s, id, modes[k], 3, &out[k]) != CGE_OK)
            fail_msg("run (%s): %s", cge_run_mode_name(modes[k]), cge_last_error());
}

/* Pads {0,1,0,0,1,0} of mf_attr_graph's Pad rewritten in the file to a
 * million after loading: the kernel once read the new pads through the
 * mapping and wrote past its output (SIGSEGV). The metadata is overwritten
 * too. Sessions made before and after the change give the outputs of the
 * model as loaded (those of the compiled graph) in every mode. */
static void test_file_changed_after_load(void **state)
{
    (void)state;
    cge_graph *g = mf_attr_graph();
    cge_plan *p = mf_compile(g, 1, CGE_OPT_DEFAULT);
    char path[512];
    mf_temp_path(path, sizeof path, ".cgm");
    assert_int_equal(cge_model_save(p, path, NULL), CGE_OK);
    cge_plan_destroy(p);
    cge_model *m = NULL;
    if (cge_model_load(path, NULL, &m) != CGE_OK)
        fail_msg("%s", cge_last_error());
    cge_model_info info;
    assert_int_equal(cge_model_get_info(m, &info), CGE_OK);
    assert_true(info.mapped);
    /* the metadata and the small constants, not the whole file */
    assert_true(info.private_bytes >= info.weights_offset);
    assert_true(info.private_bytes < info.file_bytes ||
                info.file_bytes - info.weights_offset <= 64 * 1024);
    const cge_plan_value *pads = step_input(cge_model_plan(m), "Pad", 1);
    assert_int_equal(pads->storage, CGE_STORAGE_CONSTANT);
    assert_int_equal(pads->dtype, CGE_I64);
    assert_int_equal(pads->bytes, 6 * sizeof(int64_t));
    uint64_t at = info.weights_offset + pads->offset;
    const int64_t *live = (const int64_t *)((const char *)cge_model_weights(m) + pads->offset);
    assert_int_equal(live[1], 1);

    cge_session *before = NULL;
    assert_int_equal(cge_session_create(NULL, &before), CGE_OK);
    assert_int_equal(cge_session_add_graph(before, 1, g), CGE_OK);
    assert_int_equal(cge_session_add_model(before, 2, m), CGE_OK);
    mf_outputs ref[3], got[3];
    run_all_modes(before, 2, ref);
    mf_outputs compiled;
    assert_int_equal(mf_run(before, 1, CGE_RUN_PLAN, 3, &compiled), CGE_OK);
    mf_assert_same(&compiled, &ref[0]);
    mf_outputs_free(&compiled);

    const int64_t huge[6] = {0, 1000000, 0, 0, 1000000, 0};
    write_at(path, at, huge, sizeof huge);
    char *junk = malloc(info.weights_offset);
    memset(junk, 0xA5, info.weights_offset);
    write_at(path, 0, junk, info.weights_offset);
    free(junk);
    /* The file says otherwise now; the model keeps what it checked. */
    size_t size;
    char *d = read_all(path, &size);
    assert_memory_equal(d + at, huge, sizeof huge);
    free(d);
    assert_int_equal(live[1], 1);

    run_all_modes(before, 2, got);
    for (int k = 0; k < 3; k++) {
        mf_assert_same(&ref[k], &got[k]);
        mf_outputs_free(&got[k]);
    }
    cge_session *after = NULL;
    assert_int_equal(cge_session_create(NULL, &after), CGE_OK);
    assert_int_equal(cge_session_add_model(after, 5, m), CGE_OK);
    cge_model_destroy(m);
    run_all_modes(after, 5, got);
    for (int k = 0; k < 3; k++) {
        mf_assert_same(&ref[k], &got[k]);
        mf_outputs_free(&got[k]);
        mf_outputs_free(&ref[k]);
    }
    cge_session_destroy(after);
    cge_session_destroy(before);
    cge_graph_destroy(g);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32_fast_path),
        cmocka_unit_test(test_weights_checked_by_default),
        cmocka_unit_test(test_file_changed_after_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
