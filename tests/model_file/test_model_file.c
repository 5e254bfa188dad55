/* The offline model file: save -> load -> run gives bit-identical outputs to
 * the session compiling the graph itself, in every run mode and with two
 * streams; weights stay in the file mapping; a session keeps a model alive;
 * foreign files, other format versions, architectures and missing CPU
 * features are [io] errors saying what differs; custom operator libraries are
 * recorded by name; real ONNX models round-trip when present. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "mf_util.h"
#include "model_file/format.h"

/* Compiles `g`, saves, loads, and checks every mode against the session's
 * own compile of `g`. */
static void roundtrip(cge_graph *g, int streams)
{
    cge_plan *p = mf_compile(g, streams, CGE_OPT_DEFAULT);
    void *data = NULL;
    size_t size = 0;
    assert_int_equal(cge_model_save_buffer(p, NULL, &data, &size), CGE_OK);
    cge_plan_destroy(p);
    cge_model *m = NULL;
    if (cge_model_load_buffer(data, size, NULL, &m) != CGE_OK)
        fail_msg("load: %s", cge_last_error());
    free(data);
    cge_session_options so = {.num_streams = streams};
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    assert_int_equal(cge_session_add_model(s, 2, m), CGE_OK);
    cge_model_destroy(m);   /* the session keeps it */
    /* Descriptors come from the loaded plan. */
    int32_t ni1, no1, ni2, no2;
    assert_int_equal(cge_session_num_io(s, 1, &ni1, &no1), CGE_OK);
    assert_int_equal(cge_session_num_io(s, 2, &ni2, &no2), CGE_OK);
    assert_int_equal(ni1, ni2);
    assert_int_equal(no1, no2);
    for (int32_t i = 0; i < ni1; i++) {
        cge_tensor_desc a, b;
        assert_int_equal(cge_session_input_desc(s, 1, i, &a), CGE_OK);
        assert_int_equal(cge_session_input_desc(s, 2, i, &b), CGE_OK);
        assert_string_equal(a.name, b.name);
        assert_int_equal(a.dtype, b.dtype);
        assert_true(cge_shape_equal(&a.shape, &b.shape));
    }
    cge_run_mode modes[3] = {CGE_RUN_PLAN, CGE_RUN_REPLAY, CGE_RUN_EAGER};
    for (int k = 0; k < 3; k++) {
        for (uint32_t seed = 1; seed <= 2; seed++) {
            mf_outputs ref, got;
            cge_run_mode rm = modes[k] == CGE_RUN_EAGER ? CGE_RUN_PLAN : modes[k];
            if (mf_run(s, 1, rm, seed, &ref) != CGE_OK)
                fail_msg("graph run: %s", cge_last_error());
            if (mf_run(s, 2, modes[k], seed, &got) != CGE_OK)
                fail_msg("model run (%s): %s", cge_run_mode_name(modes[k]), cge_last_error());
            cge_run_mode used;
            assert_int_equal(cge_session_last_run_mode(s, 2, &used), CGE_OK);
            assert_int_equal(used, modes[k]);
            mf_assert_same(&ref, &got);
            mf_outputs_free(&ref);
            mf_outputs_free(&got);
        }
    }
    assert_int_equal(cge_session_remove_graph(s, 2), CGE_OK);
    cge_session_destroy(s);
}

static void test_roundtrip_mixed(void **state)
{
    (void)state;
    cge_graph *g = mf_mixed_graph(37);
    roundtrip(g, 1);
    cge_graph_destroy(g);
}

static void test_roundtrip_attrs_two_streams(void **state)
{
    (void)state;
    cge_graph *g = mf_attr_graph();
    roundtrip(g, 1);
    roundtrip(g, 2);
    cge_graph_destroy(g);
}

/* The plan as loaded equals the plan as compiled: steps, values, offsets. */
static void test_plan_fields_survive(void **state)
{
    (void)state;
    cge_graph *g = mf_attr_graph();
    cge_plan *p = mf_compile(g, 2, CGE_OPT_DEFAULT);
    cge_graph_destroy(g);
    void *data = NULL;
    size_t size = 0;
    cge_model_save_options so = {.opt_level = CGE_OPT_FUSE};
    assert_int_equal(cge_model_save_buffer(p, &so, &data, &size), CGE_OK);
    cge_model *m = NULL;
    assert_int_equal(cge_model_load_buffer(data, size, NULL, &m), CGE_OK);
    const cge_plan *q = cge_model_plan(m);
    assert_int_equal(cge_plan_num_steps(p), cge_plan_num_steps(q));
    assert_int_equal(cge_plan_num_values(p), cge_plan_num_values(q));
    assert_int_equal(cge_plan_arena_bytes(p), cge_plan_arena_bytes(q));
    assert_int_equal(cge_plan_constant_bytes(p), cge_plan_constant_bytes(q));
    assert_int_equal(cge_plan_num_streams(p), cge_plan_num_streams(q));
    assert_int_equal(cge_plan_num_events(p), cge_plan_num_events(q));
    assert_int_equal(cge_model_weight_bytes(m), cge_plan_constant_bytes(p));
    for (int32_t t = 0; t < cge_plan_num_steps(p); t++) {
        const cge_plan_step *a = &cge_plan_steps(p)[t], *b = &cge_plan_steps(q)[t];
        assert_string_equal(cge_node_op_type(a->node), cge_node_op_type(b->node));
        assert_string_equal(cge_node_name(a->node), cge_node_name(b->node));
        assert_ptr_equal(a->kernel, b->kernel);
        assert_ptr_equal(a->def, b->def);
        assert_int_equal(a->stream, b->stream);
        assert_int_equal(a->num_waits, b->num_waits);
        assert_int_equal(a->record, b->record);
        assert_int_equal(a->workspace_bytes, b->workspace_bytes);
        assert_int_equal(cge_attrs_count(cge_node_attrs_const(a->node)),
                         cge_attrs_count(cge_node_attrs_const(b->node)));
    }
    for (int32_t v = 0; v < cge_plan_num_values(p); v++) {
        const cge_plan_value *a = &cge_plan_values(p)[v], *b = &cge_plan_values(q)[v];
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->storage, b->storage);
        assert_int_equal(a->offset, b->offset);
        assert_int_equal(a->alias_of, b->alias_of);
        assert_true(cge_shape_equal(&a->shape, &b->shape));
    }
    /* The constants are the plan's, byte for byte. */
    void *blob = malloc(cge_plan_constant_bytes(p) + 1);
    cge_plan_write_constants(p, blob);
    assert_memory_equal(blob, cge_model_weights(m), cge_plan_constant_bytes(p));
    free(blob);
    cge_model_info info;
    assert_int_equal(cge_model_get_info(m, &info), CGE_OK);
    assert_int_equal(info.format_version, CGE_MODEL_FORMAT_VERSION);
    assert_int_equal(info.opt_level, CGE_OPT_FUSE);
    assert_false(info.mapped);
    assert_int_equal(info.file_bytes, size);
    assert_int_equal(info.weights_offset % 4096, 0);
    /* Statistics as compiled. */
    const cge_plan_stats *sa = cge_plan_get_stats(p), *sb = cge_plan_get_stats(q);
    assert_int_equal(sa->lower_bound_bytes, sb->lower_bound_bytes);
    assert_int_equal(sa->naive_bytes, sb->naive_bytes);
    assert_int_equal(sa->nodes_in, sb->nodes_in);
    cge_model_destroy(m);
    cge_plan_destroy(p);
    free(data);
}

/* Whether [addr, addr+1) lies in a mapping of `path` (/proc/self/maps). */
static bool mapped_from(const void *addr, const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    uintptr_t a = (uintptr_t)addr;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
            continue;
        const char *slash = strchr(line, '/');
        line[strcspn(line, "\n")] = '\0';
        found = a >= lo && a < hi && slash && !strcmp(slash, path);
    }
    fclose(f);
    return found;
}

static void test_file_is_mapped_not_copied(void **state)
{
    (void)state;
    cge_graph *g = mf_attr_graph();
    cge_plan *p = mf_compile(g, 1, CGE_OPT_DEFAULT);
    char path[512];
    mf_temp_path(path, sizeof path, ".cgm");
    assert_int_equal(cge_model_save(p, path, NULL), CGE_OK);
    cge_model *m = NULL;
    if (cge_model_load(path, NULL, &m) != CGE_OK)
        fail_msg("%s", cge_last_error());
    cge_model_info info;
    assert_int_equal(cge_model_get_info(m, &info), CGE_OK);
    assert_true(info.mapped);
    assert_true(info.load_ms >= 0.0);
    assert_true(cge_model_weight_bytes(m) > 0);
    assert_int_equal((uintptr_t)cge_model_weights(m) % 64, 0);
    assert_true(mapped_from(cge_model_weights(m), path));
    /* Runs give the compiled graph's outputs. */
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_model(s, 7, m), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 8, g), CGE_OK);
    mf_outputs a, b;
    assert_int_equal(mf_run(s, 7, CGE_RUN_DEFAULT, 3, &a), CGE_OK);
    assert_int_equal(mf_run(s, 8, CGE_RUN_DEFAULT, 3, &b), CGE_OK);
    mf_assert_same(&a, &b);
    mf_outputs_free(&a);
    mf_outputs_free(&b);
    /* The same model in a second id; then the caller lets go of it. */
    assert_int_equal(cge_session_add_model(s, 9, m), CGE_OK);
    assert_int_equal(cge_session_add_model(s, 9, m), CGE_ERR_EXISTS);
    cge_model_destroy(m);
    unlink(path);   /* the mapping stays valid */
    assert_int_equal(mf_run(s, 9, CGE_RUN_REPLAY, 4, &a), CGE_OK);
    assert_int_equal(mf_run(s, 8, CGE_RUN_REPLAY, 4, &b), CGE_OK);
    mf_assert_same(&a, &b);
    mf_outputs_free(&a);
    mf_outputs_free(&b);
    cge_session_destroy(s);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

/* The model's inputs are fixed: other shapes, dtypes and names are refused. */
static void test_inputs_checked(void **state)
{
    (void)state;
    cge_graph *g = mf_mixed_graph(4);
    cge_plan *p = mf_compile(g, 1, CGE_OPT_DEFAULT);
    cge_graph_destroy(g);
    void *data;
    size_t size;
    assert_int_equal(cge_model_save_buffer(p, NULL, &data, &size), CGE_OK);
    cge_plan_destroy(p);
    cge_model *m = NULL;
    assert_int_equal(cge_model_load_buffer(data, size, NULL, &m), CGE_OK);
    free(data);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_model(s, 1, m), CGE_OK);
    cge_model_destroy(m);
    float x[5 * 4] = {0}, y[3 * 5], sum[5];
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(5, 4), .data = x,
                     .bytes = sizeof x};
    cge_tensor out[2] = {{.name = "y", .data = y, .bytes = sizeof y},
                         {.name = "s", .data = sum, .bytes = sizeof sum}};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, out, 2), CGE_ERR_SHAPE);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_SESSION);
    in.name = "nope";
    in.shape = CGE_SHAPE(4, 4);
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, out, 2), CGE_ERR_NOT_FOUND);
    in.name = "x";
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, out, 2), CGE_OK);
    cge_session_destroy(s);
}

/* ---- refusals ------------------------------------------------------------------ */

static void expect_io(cge_status st, const char *needle)
{
    assert_int_not_equal(st, CGE_OK);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_IO);
    if (needle && !strstr(cge_last_error(), needle))
        fail_msg("error '%s' does not mention '%s'", cge_last_error(), needle);
}

static void *saved_mixed(size_t *size)
{
    cge_graph *g = mf_mixed_graph(4);
    cge_plan *p = mf_compile(g, 1, CGE_OPT_DEFAULT);
    cge_graph_destroy(g);
    void *data = NULL;
    assert_int_equal(cge_model_save_buffer(p, NULL, &data, size), CGE_OK);
    cge_plan_destroy(p);
    return data;
}

static void test_foreign_and_missing_files(void **state)
{
    (void)state;
    cge_model *m = (cge_model *)1;
    expect_io(cge_model_load("/nonexistent/dir/x.cgm", NULL, &m), "cannot open");
    assert_null(m);
    expect_io(cge_model_load("/tmp", NULL, &m), "directory");
    char path[512];
    mf_temp_path(path, sizeof path, ".cgm");
    assert_int_equal(mf_write_file(path, "", 0), 0);
    expect_io(cge_model_load(path, NULL, &m), "empty");
    const char text[] = "this is a text file, not a model, and it is long enough to hold a "
                        "header of 128 bytes so that only the magic tells it apart. ..........";
    assert_int_equal(mf_write_file(path, text, sizeof text), 0);
    expect_io(cge_model_load(path, NULL, &m), "not a cge model file");
    assert_string_equal(strstr(cge_last_error(), path) ? path : "", path);
    unlink(path);
    /* An ONNX protobuf's first bytes. */
    unsigned char onnx[200] = {0x08, 0x07, 0x12, 0x07, 'p', 'y', 't', 'o', 'r', 'c', 'h'};
    expect_io(cge_model_load_buffer(onnx, sizeof onnx, NULL, &m), "not a cge model file");
    expect_io(cge_model_load_buffer(onnx, 10, NULL, &m), "too short");
    assert_null(m);
}

static void patch_u32(void *data, size_t off, uint32_t v) { memcpy((char *)data + off, &v, 4); }

static void test_version_arch_and_features(void **state)
{
    (void)state;
    size_t size;
    char *data = saved_mixed(&size);
    char *copy = malloc(size);
    cge_model *m = NULL;
    /* Another format version, even with a correct checksum. */
    memcpy(copy, data, size);
    patch_u32(copy, offsetof(cgm_header, format_version), CGE_MODEL_FORMAT_VERSION + 1);
    mf_fix_crc(copy, size);
    expect_io(cge_model_load_buffer(copy, size, NULL, &m), "format version 2");
    /* Another byte order. */
    memcpy(copy, data, size);
    patch_u32(copy, offsetof(cgm_header, byte_order), 0x04030201u);
    expect_io(cge_model_load_buffer(copy, size, NULL, &m), "byte order");
    /* Another architecture. */
    memcpy(copy, data, size);
    memcpy(copy + offsetof(cgm_header, arch), "riscv64\0\0\0\0\0\0\0\0", 16);
    mf_fix_crc(copy, size);
    expect_io(cge_model_load_buffer(copy, size, NULL, &m), "compiled for riscv64");
    /* A checksum that does not match. */
    memcpy(copy, data, size);
    copy[offsetof(cgm_header, cpu_compiled_on)] ^= 0x40;
    expect_io(cge_model_load_buffer(copy, size, NULL, &m), "checksum mismatch");
    /* A machine without the features the kernels were built for. */
    cge_model_load_options lo = {.cpu_features = CGE_CPU_SSE2};
    cgm_header h;
    memcpy(&h, data, sizeof h);
    if (h.cpu_required & ~(uint64_t)CGE_CPU_SSE2) {
        expect_io(cge_model_load_buffer(data, size, &lo, &m), "CPU features this machine lacks");
        char want[128];
        cge_cpu_features_str(h.cpu_required & ~(uint64_t)CGE_CPU_SSE2, want, sizeof want);
        assert_non_null(strstr(cge_last_error(), want));
    }
    /* ... and a requirement no machine has (a future feature bit). */
    memcpy(copy, data, size);
    h.cpu_required |= (uint64_t)1 << 40;
    memcpy(copy, &h, sizeof h);
    mf_fix_crc(copy, size);
    expect_io(cge_model_load_buffer(copy, size, NULL, &m), "bit40");
    /* With every feature it loads. */
    lo.cpu_features = ~(uint64_t)0;
    assert_int_equal(cge_model_load_buffer(data, size, &lo, &m), CGE_OK);
    cge_model_destroy(m);
    /* Corrupt weights load (only metadata is always checked) unless asked. */
    memcpy(copy, data, size);
    copy[size - 1] ^= 1;
    assert_int_equal(cge_model_load_buffer(copy, size, NULL, &m), CGE_OK);
    cge_model_destroy(m);
    m = NULL;
    cge_model_load_options vw = {.verify_weights = true};
    expect_io(cge_model_load_buffer(copy, size, &vw, &m), "weights checksum mismatch");
    assert_null(m);
    assert_int_equal(cge_model_load_buffer(data, size, &vw, &m), CGE_OK);
    cge_model_destroy(m);
    free(copy);
    free(data);
}

static void test_save_errors(void **state)
{
    (void)state;
    cge_graph *g = mf_mixed_graph(4);
    cge_plan *p = mf_compile(g, 1, CGE_OPT_DEFAULT);
    cge_graph_destroy(g);
    cge_status st = cge_model_save(p, "/nonexistent/dir/x.cgm", NULL);
    assert_int_equal(st, CGE_ERR_IO);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_IO);
    assert_non_null(strstr(cge_last_error(), "/nonexistent/dir/x.cgm"));
    assert_int_equal(cge_model_save(NULL, "/tmp/x.cgm", NULL), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_model_save(p, NULL, NULL), CGE_ERR_INVALID_ARG);
    cge_plan_destroy(p);
    cge_model_destroy(NULL);
    assert_null(cge_model_plan(NULL));
    assert_int_equal(cge_session_add_model(NULL, 1, NULL), CGE_ERR_INVALID_ARG);
}

/* ---- custom operator libraries ------------------------------------------------------- */

static void test_custom_library_recorded(void **state)
{
    (void)state;
    if (cge_load_op_library(TEST_OPLIB_PATH) != CGE_OK)
        fail_msg("%s", cge_last_error());
    cge_builder *b = cge_builder_create("custom");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(2, 8));
    cge_attr a = CGE_ATTR_F("scale", 3.0f);
    cge_t y = cge_es_op1(b, "TestScale", "test", &x, 1, &a, 1);
    cge_es_output(b, cge_es_relu(b, y), "y");
    cge_graph *g = NULL;
    assert_int_equal(cge_builder_finish(b, &g), CGE_OK);
    cge_builder_destroy(b);
    cge_plan *p = mf_compile(g, 1, CGE_OPT_DEFAULT);
    const char *libs[2] = {"/nonexistent/libfoo.so", TEST_OPLIB_PATH};
    cge_model_save_options so = {.op_libraries = libs, .num_op_libraries = 2};
    void *data;
    size_t size;
    assert_int_equal(cge_model_save_buffer(p, &so, &data, &size), CGE_OK);
    cge_plan_destroy(p);
    cge_model *m = NULL;
    assert_int_equal(cge_model_load_buffer(data, size, NULL, &m), CGE_OK);
    const char *name, *path;
    assert_true(cge_model_op_library(m, 0, &name, &path));
    assert_string_equal(name, "test_oplib");
    assert_string_equal(path, TEST_OPLIB_PATH);
    assert_false(cge_model_op_library(m, 1, &name, &path));
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_model(s, 1, m), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 2, g), CGE_OK);
    mf_outputs r1, r2;
    assert_int_equal(mf_run(s, 1, CGE_RUN_DEFAULT, 9, &r1), CGE_OK);
    assert_int_equal(mf_run(s, 2, CGE_RUN_DEFAULT, 9, &r2), CGE_OK);
    mf_assert_same(&r1, &r2);
    mf_outputs_free(&r1);
    mf_outputs_free(&r2);
    cge_session_destroy(s);
    cge_model_destroy(m);
    /* An operator this cge lacks (as if the library were not loaded): the
     * error names it and the library the model was compiled with. */
    char *hit = memmem(data, size, "TestScale", 10);   /* the op type, NUL included */
    assert_non_null(hit);
    memcpy(hit, "TestScalX", 9);
    mf_fix_crc(data, size);
    expect_io(cge_model_load_buffer(data, size, NULL, &m), "test.TestScalX");
    assert_non_null(strstr(cge_last_error(), "'test_oplib'"));
    assert_non_null(strstr(cge_last_error(), TEST_OPLIB_PATH));
    free(data);
    cge_graph_destroy(g);
}

/* ---- real models (scripts/make_test_models.py, when generated) ---------------------- */

static void test_real_models(void **state)
{
    (void)state;
    const char *dir = getenv("CGE_MODEL_DIR");
    char buf[1024];
    if (!dir || !dir[0]) {
        snprintf(buf, sizeof buf, "%s/../build/test_models", CGE_TEST_SOURCE_DIR);
        dir = buf;
    }
    const char *names[3] = {"resnet18", "mobilenet_v2", "transformer_encoder"};
    int done = 0;
    for (int k = 0; k < 3; k++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s.onnx", dir, names[k]);
        if (access(path, R_OK))
            continue;
        cge_graph *g = NULL;
        if (cge_onnx_import_file(path, NULL, &g) != CGE_OK)
            fail_msg("%s: %s", path, cge_last_error());
        roundtrip(g, 1);
        cge_graph_destroy(g);
        done++;
    }
    if (!done)
        skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_mixed),
        cmocka_unit_test(test_roundtrip_attrs_two_streams),
        cmocka_unit_test(test_plan_fields_survive),
        cmocka_unit_test(test_file_is_mapped_not_copied),
        cmocka_unit_test(test_inputs_checked),
        cmocka_unit_test(test_foreign_and_missing_files),
        cmocka_unit_test(test_version_arch_and_features),
        cmocka_unit_test(test_save_errors),
        cmocka_unit_test(test_custom_library_recorded),
        cmocka_unit_test(test_real_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
