/* Model files with symbolic dims (format 2): a plan compiled once for
 * [batch, seq] is saved with its shape program, loaded, and serves every size
 * like a session over the graph does: results equal a static compile of each
 * size; a size meta refuses is its [meta] error; a damaged shape program
 * section is an [io] error; a version 1 file (static) still loads. */
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

enum { D = MF_SYM_D, MAXB = 4, MAXS = 9 };

static void node(cge_graph *g, const char *op, const char *name, const char **in, int32_t ni,
                 const char **out, cge_node **n)
{
    assert_int_equal(cge_graph_add_node(g, op, "", name, in, ni, out, 1, n), CGE_OK);
}

static cge_graph *build(int64_t batch, int64_t seq) { return mf_symbolic_graph(batch, seq); }
static cge_plan *symbolic_plan(const cge_graph *g) { return mf_compile_symbolic(g); }

static void *saved_symbolic(cge_graph *g, size_t *size)
{
    cge_plan *p = symbolic_plan(g);
    void *data = NULL;
    assert_int_equal(cge_model_save_buffer(p, NULL, &data, size), CGE_OK);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
    return data;
}

static cge_status run(cge_session *s, int64_t batch, int64_t seq, float *y)
{
    static float x[MAXB * MAXS * D];
    for (int i = 0; i < MAXB * MAXS * D; i++)
        x[i] = (float)((i * 5) % 11) * 0.25f - 1.0f;
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(batch, seq, D), .data = x,
                     .bytes = sizeof(float) * (size_t)(batch * seq * D)};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof(float) * MAXB * MAXS * D};
    cge_status st = cge_session_run_graph(s, 1, &in, 1, &out, 1);
    if (!st) {
        assert_int_equal(out.shape.rank, 2);
        assert_int_equal(out.shape.dims[0], batch);
        assert_int_equal(out.shape.dims[1], seq * D);
    }
    return st;
}

static void test_symbolic_model_serves_every_size(void **state)
{
    (void)state;
    size_t size = 0;
    void *data = saved_symbolic(build(0, 0), &size);
    cge_model *m = NULL;
    if (cge_model_load_buffer(data, size, NULL, &m))
        fail_msg("%s", cge_last_error());
    cge_model_info info;
    assert_int_equal(cge_model_get_info(m, &info), CGE_OK);
    assert_int_equal(info.format_version, CGE_MODEL_FORMAT_VERSION);
    assert_true(cge_plan_is_symbolic(cge_model_plan(m)));
    static const int64_t sizes[][2] = {{1, 1}, {2, 3}, {3, 5}, {1, 9}, {4, 2}, {2, 3}, {1, 1}};
    for (int mode = 0; mode < 2; mode++) {
        cge_session_options so = {.run_mode = mode ? CGE_RUN_REPLAY : CGE_RUN_DEFAULT};
        cge_session *s = NULL;
        assert_int_equal(cge_session_create(&so, &s), CGE_OK);
        assert_int_equal(cge_session_add_model(s, 1, m), CGE_OK);
        /* The inputs keep their symbols, named as in the graph. */
        cge_tensor_desc d;
        assert_int_equal(cge_session_input_desc(s, 1, 0, &d), CGE_OK);
        assert_true(cge_dim_is_symbol(d.shape.dims[0]));
        assert_string_equal(cge_session_dim_symbol_name(s, 1, d.shape.dims[1]), "seq");
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            float y[MAXB * MAXS * D], want[MAXB * MAXS * D];
            assert_int_equal(run(s, sizes[k][0], sizes[k][1], y), CGE_OK);
            cge_session *r = NULL;
            assert_int_equal(cge_session_create(NULL, &r), CGE_OK);
            cge_graph *gs = build(sizes[k][0], sizes[k][1]);
            assert_int_equal(cge_session_add_graph(r, 1, gs), CGE_OK);
            cge_graph_destroy(gs);
            assert_int_equal(run(r, sizes[k][0], sizes[k][1], want), CGE_OK);
            cge_session_destroy(r);
            for (int64_t i = 0; i < sizes[k][0] * sizes[k][1] * D; i++)
                if (y[i] - want[i] > 1e-6f || want[i] - y[i] > 1e-6f)
                    fail_msg("mode %d, size %lld x %lld, element %lld: %g, not %g", mode,
                             (long long)sizes[k][0], (long long)sizes[k][1], (long long)i,
                             (double)y[i], (double)want[i]);
        }
        cge_session_graph_stats gs;
        assert_int_equal(cge_session_get_graph_stats(s, 1, &gs), CGE_OK);
        assert_int_equal(gs.compiles, 0);   /* every size from the shape program */
        assert_true(gs.specializations >= 5);
        assert_true(gs.shape_program);
        cge_session_destroy(s);
    }
    cge_model_destroy(m);
    free(data);
}

/* a [batch, n] + b [batch, m]: only a run sees that 3 and 4 do not
 * broadcast; the loaded model refuses it as the session over the graph
 * does, with meta's error naming the node, and serves good sizes after. */
static void test_symbolic_model_refuses_bad_sizes(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("bad", &g), CGE_OK);
    int64_t b = cge_graph_dim_symbol(g, "batch");
    cge_shape as = CGE_SHAPE(b, cge_graph_dim_symbol(g, "n")),
              bs = CGE_SHAPE(b, cge_graph_dim_symbol(g, "m"));
    assert_int_equal(cge_graph_add_input(g, "a", CGE_F32, &as), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "b", CGE_F32, &bs), CGE_OK);
    const char *ai[] = {"a", "b"}, *ao[] = {"c"};
    node(g, "Add", "add_ab", ai, 2, ao, NULL);
    assert_int_equal(cge_graph_add_output(g, "c"), CGE_OK);
    size_t size = 0;
    void *data = saved_symbolic(g, &size);
    cge_model *m = NULL;
    assert_int_equal(cge_model_load_buffer(data, size, NULL, &m), CGE_OK);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_model(s, 1, m), CGE_OK);
    float a[8] = {0}, bb[8] = {0}, c[8];
    cge_tensor in[2] = {{.name = "a", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 3), .data = a,
                         .bytes = sizeof a},
                        {.name = "b", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 4), .data = bb,
                         .bytes = sizeof bb}};
    cge_tensor out = {.name = "c", .data = c, .bytes = sizeof c};
    assert_int_not_equal(cge_session_run_graph(s, 1, in, 2, &out, 1), CGE_OK);
    if (cge_last_error_layer() != CGE_LAYER_META || !strstr(cge_last_error(), "add_ab"))
        fail_msg("unexpected message: %s", cge_last_error());
    /* Two inputs that give one symbol two sizes: named by the session. */
    in[1].shape = CGE_SHAPE(1, 3);
    assert_int_not_equal(cge_session_run_graph(s, 1, in, 2, &out, 1), CGE_OK);
    if (!strstr(cge_last_error(), "'batch'"))
        fail_msg("unexpected message: %s", cge_last_error());
    in[1].shape = CGE_SHAPE(2, 3);
    assert_int_equal(cge_session_run_graph(s, 1, in, 2, &out, 1), CGE_OK);
    cge_session_destroy(s);
    cge_model_destroy(m);
    free(data);
}

static const cgm_section *section(const char *data, cgm_section_kind kind)
{
    cgm_header h;
    memcpy(&h, data, sizeof h);
    const cgm_section *tab = (const cgm_section *)(data + h.section_table);
    for (uint32_t s = 0; s < h.num_sections; s++)
        if (tab[s].kind == (uint32_t)kind)
            return &tab[s];
    return NULL;
}

static void expect_io_error(const void *data, size_t size)
{
    cge_model *m = (cge_model *)1;
    assert_int_not_equal(cge_model_load_buffer(data, size, NULL, &m), CGE_OK);
    assert_null(m);
    if (cge_last_error_layer() != CGE_LAYER_IO)
        fail_msg("not an [io] error: %s", cge_last_error());
}

/* Every word of the shape program section perturbed (checksum recomputed,
 * as a crafted file has it), and the file cut inside it: [io] errors, or a
 * harmless change that loads; never a crash. */
/* A damaged variant is an [io] error or loads: counts[0] refused, [1] loaded. */
static void load_variant(const void *data, size_t size, void *user)
{
    int *counts = user;
    cge_model *m = NULL;
    if (cge_model_load_buffer(data, size, NULL, &m)) {
        assert_int_equal(cge_last_error_layer(), CGE_LAYER_IO);
        counts[0]++;
    } else {
        counts[1]++;
        cge_model_destroy(m);
    }
}

static void test_damaged_shape_program(void **state)
{
    (void)state;
    size_t size = 0;
    char *data = saved_symbolic(build(0, 0), &size);
    const cgm_section *sp = section(data, CGM_SEC_SHAPES);
    assert_non_null(sp);
    assert_true(sp->count == 3);   /* header, batch, seq */
    size_t lo = sp->offset, hi = sp->offset + sp->bytes;
    char *copy = malloc(size);
    int counts[2] = {0, 0};   /* refused, loaded */
    mf_perturb_words(data, size, lo, hi, load_variant, counts);
    assert_true(counts[0] > 0);
    /* The magic and the count are always caught. */
    memcpy(copy, data, size);
    copy[lo] ^= 1;
    mf_fix_crc(copy, size);
    expect_io_error(copy, size);
    memcpy(copy, data, size);
    uint32_t n = 7;
    memcpy(copy + lo + 4, &n, 4);
    mf_fix_crc(copy, size);
    expect_io_error(copy, size);
    /* A symbol id past the table, in a value's dims. */
    memcpy(copy, data, size);
    n = 1;
    memcpy(copy + lo + 4, &n, 4);   /* names batch only; seq's id is now unknown */
    cgm_section *tab = (cgm_section *)(copy + ((cgm_header *)copy)->section_table);
    for (uint32_t s = 0; s < ((cgm_header *)copy)->num_sections; s++)
        if (tab[s].kind == CGM_SEC_SHAPES) {
            tab[s].count = 2;
            tab[s].bytes = 2 * sizeof(cgm_symbol);
        }
    mf_fix_crc(copy, size);
    expect_io_error(copy, size);
    /* Cut inside the section. */
    for (size_t cut = lo; cut < hi; cut += 4)
        expect_io_error(data, cut);
    print_message("shape program perturbations: %d refused, %d loaded\n", counts[0], counts[1]);
    free(copy);
    free(data);
}

/* A version 1 file (a static plan: no shape program section) still loads
 * and runs; a version this cge does not know is refused by name. */
static void test_version_1_still_loads(void **state)
{
    (void)state;
    cge_graph *g = mf_mixed_graph(4);
    cge_plan *p = mf_compile(g, 1, CGE_OPT_DEFAULT);
    cge_graph_destroy(g);
    void *data = NULL;
    size_t size = 0;
    assert_int_equal(cge_model_save_buffer(p, NULL, &data, &size), CGE_OK);
    cge_plan_destroy(p);
    /* Rewrite it as version 1 wrote it: the same sections but the shape
     * program's (empty for a static plan), dropped from the table. */
    char *v1 = malloc(size);
    memcpy(v1, data, size);
    cgm_header *h = (cgm_header *)v1;
    cgm_section *tab = (cgm_section *)(v1 + h->section_table);
    uint32_t kept = 0;
    for (uint32_t s = 0; s < h->num_sections; s++)
        if (tab[s].kind != CGM_SEC_SHAPES)
            tab[kept++] = tab[s];
    assert_int_equal(kept, h->num_sections - 1);
    h->num_sections = kept;
    h->format_version = 1;
    mf_fix_crc(v1, size);
    cge_model *m = NULL;
    assert_int_equal(cge_model_load_buffer(v1, size, NULL, &m), CGE_OK);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_model(s, 1, m), CGE_OK);
    mf_outputs a, b;
    assert_int_equal(mf_run(s, 1, CGE_RUN_PLAN, 3, &a), CGE_OK);
    cge_model *m2 = NULL;
    assert_int_equal(cge_model_load_buffer(data, size, NULL, &m2), CGE_OK);
    assert_int_equal(cge_session_add_model(s, 2, m2), CGE_OK);
    assert_int_equal(mf_run(s, 2, CGE_RUN_PLAN, 3, &b), CGE_OK);
    mf_assert_same(&a, &b);
    mf_outputs_free(&a);
    mf_outputs_free(&b);
    cge_session_destroy(s);
    cge_model_destroy(m);
    cge_model_destroy(m2);
    /* A shape program section in a version 1 file is not version 1's. */
    memcpy(v1, data, size);
    ((cgm_header *)v1)->format_version = 1;
    mf_fix_crc(v1, size);
    expect_io_error(v1, size);
    ((cgm_header *)v1)->format_version = CGE_MODEL_FORMAT_VERSION + 1;
    mf_fix_crc(v1, size);
    expect_io_error(v1, size);
    assert_non_null(strstr(cge_last_error(), "reads versions 1 to"));
    free(v1);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symbolic_model_serves_every_size),
        cmocka_unit_test(test_symbolic_model_refuses_bad_sizes),
        cmocka_unit_test(test_damaged_shape_program),
        cmocka_unit_test(test_version_1_still_loads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
