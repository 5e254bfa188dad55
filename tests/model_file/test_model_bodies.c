/* Graph attributes in the model file (format version 4): a plan whose Loop
 * holds a body (with a constant of its own, an outer value, and an If
 * nested in it) and whose If holds two branches saves, loads, and runs to
 * the same bytes as the plan it was saved from. A damaged body record is an
 * [io] error or harmless, never a crash; a version-3 file holding one is
 * refused. Before version 4, saving any such plan was an [io] error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "mf_util.h"
#include "model_file/format.h"

static void *saved_control(size_t *size)
{
    cge_graph *g = mf_control_graph();
    cge_plan *p = mf_compile(g, 1, CGE_OPT_DEFAULT);
    cge_graph_destroy(g);
    void *data = NULL;
    if (cge_model_save_buffer(p, NULL, &data, size))
        fail_msg("%s", cge_last_error());
    cge_plan_destroy(p);
    return data;
}

static const cge_node *node_of(const cge_plan *p, const char *op)
{
    for (int32_t k = 0; k < cge_plan_num_steps(p); k++)
        if (!strcmp(cge_node_op_type(cge_plan_steps(p)[k].node), op))
            return cge_plan_steps(p)[k].node;
    return NULL;
}

static void test_bodies_round_trip(void **state)
{
    (void)state;
    size_t size;
    void *data = saved_control(&size);
    cge_model *m = NULL;
    if (cge_model_load_buffer(data, size, NULL, &m))
        fail_msg("%s", cge_last_error());
    cge_model_info info;
    assert_int_equal(cge_model_get_info(m, &info), CGE_OK);
    assert_int_equal(info.format_version, 4);
    /* the Loop's body, with its constant and the If nested in it */
    const cge_node *loop = node_of(cge_model_plan(m), "Loop");
    assert_non_null(loop);
    const cge_graph *body = cge_attrs_get_graph(cge_node_attrs_const(loop), "body");
    assert_non_null(body);
    assert_int_equal(cge_graph_num_inputs(body), 3);
    assert_int_equal(cge_graph_num_outputs(body), 3);
    assert_int_equal(cge_graph_num_constants(body), 2);   /* W and the If's zero */
    const cge_node *nested = cge_graph_find_node(body, NULL);
    for (int32_t i = 0; i < cge_graph_num_nodes(body); i++)
        if (!strcmp(cge_node_op_type(cge_graph_node(body, i)), "If"))
            nested = cge_graph_node(body, i);
    assert_non_null(nested);
    assert_non_null(cge_attrs_get_graph(cge_node_attrs_const(nested), "else_branch"));

    /* the same bytes as the graph compiled in a session */
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = mf_control_graph();
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    assert_int_equal(cge_session_add_model(s, 2, m), CGE_OK);
    for (uint32_t seed = 1; seed <= 4; seed++) {
        mf_outputs a, b;
        if (mf_run(s, 1, CGE_RUN_PLAN, seed, &a) || mf_run(s, 2, CGE_RUN_PLAN, seed, &b))
            fail_msg("%s", cge_last_error());
        assert_int_equal(a.n, 3);
        mf_assert_same(&a, &b);
        mf_outputs_free(&a);
        mf_outputs_free(&b);
    }
    cge_session_destroy(s);
    cge_model_destroy(m);
    free(data);
}

typedef struct tally {
    cge_session *s;
    int errors, loaded;
} tally;

static void try_variant(const void *data, size_t size, void *user)
{
    tally *t = user;
    cge_session *s = t->s;
    cge_model *m = NULL;
    if (cge_model_load_buffer(data, size, NULL, &m)) {
        if (cge_last_error_layer() != CGE_LAYER_IO)
            fail_msg("not an [io] error: %s", cge_last_error());
        t->errors++;
        return;
    }
    t->loaded++;
    if (cge_session_add_model(s, 1, m) == CGE_OK) {
        mf_outputs o;
        mf_run(s, 1, CGE_RUN_PLAN, 3, &o);   /* an error or outputs: either, no crash */
        mf_outputs_free(&o);
        cge_session_remove_graph(s, 1);
    }
    cge_clear_error();
    cge_model_destroy(m);
}

/* Every 4-byte word of the aux section (the bodies' records, their lists
 * and constants) perturbed, the checksum recomputed as a crafted file would
 * have it. */
static void test_damaged_bodies(void **state)
{
    (void)state;
    size_t size;
    char *data = saved_control(&size);
    cgm_header h;
    memcpy(&h, data, sizeof h);
    const cgm_section *tab = (const cgm_section *)(data + h.section_table);
    const cgm_section *aux = NULL;
    for (uint32_t k = 0; k < h.num_sections; k++)
        if (tab[k].kind == CGM_SEC_AUX)
            aux = &tab[k];
    assert_non_null(aux);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    tally t = {.s = s};
    mf_perturb_words(data, size, aux->offset, aux->offset + aux->bytes, try_variant, &t);
    assert_true(t.errors > 0);
    char *copy = malloc(size);
    /* A version-3 file cannot hold graphs. */
    memcpy(copy, data, size);
    ((cgm_header *)copy)->format_version = 3;
    mf_fix_crc(copy, size);
    cge_model *m = NULL;
    assert_int_not_equal(cge_model_load_buffer(copy, size, NULL, &m), CGE_OK);
    assert_non_null(strstr(cge_last_error(), "format version 3 cannot hold"));
    free(copy);
    cge_session_destroy(s);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bodies_round_trip),
        cmocka_unit_test(test_damaged_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
