/* Sequences and optionals through the C API: the cge_sequence container and
 * its errors, a session run with a sequence in and out (node by node, the
 * descriptors typed), the misuse a session refuses, and compile-time folding
 * of a sequence whose elements are known (a complete plan, no sequence left). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

static void ok(cge_status st)
{
    if (st != CGE_OK)
        fail_msg("%s", cge_last_error());
}

static void test_container(void **state)
{
    (void)state;
    cge_sequence *s = NULL;
    ok(cge_sequence_create(CGE_TYPE_SEQUENCE, CGE_F32, &s));
    float a[3] = {1, 2, 3}, b[2] = {4, 5}, c[1] = {6};
    cge_shape sa = CGE_SHAPE(3), sb = CGE_SHAPE(2), sc = CGE_SHAPE(1);
    ok(cge_sequence_append(s, &sa, a));
    ok(cge_sequence_append(s, &sb, b));
    ok(cge_sequence_insert(s, -1, &sc, c));   /* before the last: a, c, b */
    assert_int_equal(cge_sequence_length(s), 3);
    cge_tensor t;
    ok(cge_sequence_at(s, -2, &t));
    assert_int_equal(t.shape.dims[0], 1);
    assert_true(((float *)t.data)[0] == 6.0f);
    ok(cge_sequence_erase(s, 0));
    ok(cge_sequence_at(s, 0, &t));
    assert_true(((float *)t.data)[0] == 6.0f);
    /* out of range: a [runtime] error, the sequence unchanged */
    assert_int_equal(cge_sequence_at(s, 2, &t), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_RUNTIME);
    assert_non_null(strstr(cge_last_error(), "index 2 is out of range for length 2"));
    assert_int_equal(cge_sequence_erase(s, -3), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_sequence_length(s), 2);
    /* a copy owns its elements */
    cge_sequence *d = NULL;
    ok(cge_sequence_create(CGE_TYPE_SEQUENCE, CGE_F32, &d));
    ok(cge_sequence_copy(d, s));
    cge_sequence_clear(s);
    ok(cge_sequence_at(d, 1, &t));
    assert_true(((float *)t.data)[1] == 5.0f);
    cge_sequence_destroy(d);
    assert_int_equal(cge_sequence_set_none(s), CGE_ERR_INVALID_ARG);  /* not an optional */
    cge_sequence_destroy(s);
    /* optionals: none at first, one tensor at most */
    ok(cge_sequence_create(CGE_TYPE_OPTIONAL, CGE_F32, &s));
    assert_false(cge_sequence_has_value(s));
    ok(cge_sequence_append(s, &sa, a));
    assert_true(cge_sequence_has_value(s));
    assert_int_equal(cge_sequence_append(s, &sa, a), CGE_ERR_INVALID_ARG);
    ok(cge_sequence_set_none(s));
    assert_false(cge_sequence_has_value(s));
    cge_sequence_destroy(s);
    cge_sequence_destroy(NULL);
    assert_int_equal(cge_sequence_create(CGE_TYPE_TENSOR, CGE_F32, &s), CGE_ERR_INVALID_ARG);
}

/* Copies share the elements' bytes (a copy is a pointer per element) yet stay
 * independent: an element erased from one and a new one inserted (which
 * reuses a spare buffer when no copy holds it) leave the other as it was,
 * and either may be destroyed first. */
static void test_copies_share_elements(void **state)
{
    (void)state;
    cge_sequence *s = NULL, *d = NULL, *e = NULL;
    ok(cge_sequence_create(CGE_TYPE_SEQUENCE, CGE_F32, &s));
    ok(cge_sequence_create(CGE_TYPE_SEQUENCE, CGE_F32, &d));
    ok(cge_sequence_create(CGE_TYPE_SEQUENCE, CGE_F32, &e));
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {9, 9, 9, 9};
    cge_shape sh = CGE_SHAPE(4);
    ok(cge_sequence_append(s, &sh, a));
    ok(cge_sequence_append(s, &sh, b));
    ok(cge_sequence_copy(d, s));
    cge_tensor ts, td;
    ok(cge_sequence_at(s, 1, &ts));
    ok(cge_sequence_at(d, 1, &td));
    assert_ptr_equal(ts.data, td.data);   /* shared, not copied */
    /* b's buffer becomes s's spare; the insert must not write into it (d holds it) */
    ok(cge_sequence_erase(s, 1));
    ok(cge_sequence_append(s, &sh, c));
    ok(cge_sequence_at(d, 1, &td));
    assert_true(((float *)td.data)[0] == 5.0f && ((float *)td.data)[3] == 8.0f);
    ok(cge_sequence_at(s, 1, &ts));
    assert_ptr_not_equal(ts.data, td.data);
    assert_true(((float *)ts.data)[0] == 9.0f);
    /* clearing and refilling d reuses nothing e still holds */
    ok(cge_sequence_copy(e, d));
    cge_sequence_clear(d);
    ok(cge_sequence_append(d, &sh, c));
    ok(cge_sequence_append(d, &sh, c));
    cge_tensor te;
    ok(cge_sequence_at(e, 0, &te));
    assert_true(((float *)te.data)[1] == 2.0f);
    ok(cge_sequence_at(e, 1, &te));
    assert_true(((float *)te.data)[2] == 7.0f);
    /* the original goes first; the copies' elements live on */
    cge_sequence_destroy(s);
    cge_sequence_destroy(d);
    ok(cge_sequence_at(e, 0, &te));
    assert_true(((float *)te.data)[3] == 4.0f);
    cge_sequence_destroy(e);
}

/* u = SequenceInsert(s, SequenceAt(s, i)), n = SequenceLength(u). */
static cge_graph *insert_graph(void)
{
    cge_graph *g = NULL;
    ok(cge_graph_create("seq", &g));
    cge_shape sc = CGE_SCALAR, el = {.rank = -1};
    ok(cge_graph_add_input(g, "s", CGE_F32, &sc));
    ok(cge_graph_set_value_type(g, "s", CGE_TYPE_SEQUENCE));
    ok(cge_graph_set_desc(g, "s", CGE_F32, &el));
    ok(cge_graph_add_input(g, "i", CGE_I64, &sc));
    const char *at_in[2] = {"s", "i"}, *at_out[1] = {"e"};
    ok(cge_graph_add_node(g, "SequenceAt", NULL, "at", at_in, 2, at_out, 1, NULL));
    const char *ins_in[2] = {"s", "e"}, *ins_out[1] = {"u"};
    ok(cge_graph_add_node(g, "SequenceInsert", NULL, "ins", ins_in, 2, ins_out, 1, NULL));
    const char *len_in[1] = {"u"}, *len_out[1] = {"n"};
    ok(cge_graph_add_node(g, "SequenceLength", NULL, "len", len_in, 1, len_out, 1, NULL));
    ok(cge_graph_add_output(g, "u"));
    ok(cge_graph_add_output(g, "n"));
    return g;
}

static void test_session_sequence_io(void **state)
{
    (void)state;
    cge_graph *g = insert_graph();
    cge_session *s = NULL;
    ok(cge_session_create(NULL, &s));
    ok(cge_session_add_graph(s, 1, g));
    cge_graph_destroy(g);
    cge_tensor_desc d;
    ok(cge_session_input_desc(s, 1, 0, &d));
    assert_int_equal(d.type, CGE_TYPE_SEQUENCE);
    ok(cge_session_compile_graph(s, 1));   /* inference types the outputs */
    ok(cge_session_output_desc(s, 1, 0, &d));
    assert_int_equal(d.type, CGE_TYPE_SEQUENCE);

    cge_sequence *in = NULL, *out = NULL;
    ok(cge_sequence_create(CGE_TYPE_SEQUENCE, CGE_F32, &in));
    ok(cge_sequence_create(CGE_TYPE_SEQUENCE, CGE_F32, &out));
    float a[2] = {1, 2}, b[3] = {3, 4, 5};
    cge_shape sa = CGE_SHAPE(2), sb = CGE_SHAPE(3);
    ok(cge_sequence_append(in, &sa, a));
    ok(cge_sequence_append(in, &sb, b));
    int64_t idx = -2, n = 0;
    cge_tensor ins[2] = {{.name = "s", .dtype = CGE_F32, .data = in},
                         {.name = "i", .dtype = CGE_I64, .shape = CGE_SCALAR, .data = &idx,
                          .bytes = sizeof idx}};
    cge_tensor outs[2] = {{.name = "u", .data = out}, {.name = "n", .data = &n, .bytes = sizeof n}};
    for (int run = 0; run < 3; run++) {   /* the element buffers are reused across runs */
        ok(cge_session_run_graph(s, 1, ins, 2, outs, 2));
        assert_int_equal(n, 3);
        assert_int_equal(cge_sequence_length(out), 3);
        cge_tensor t;
        ok(cge_sequence_at(out, 2, &t));    /* element -2 (a) appended */
        assert_int_equal(t.shape.dims[0], 2);
        assert_true(((float *)t.data)[1] == 2.0f);
    }
    cge_run_mode m;
    ok(cge_session_last_run_mode(s, 1, &m));
    assert_int_equal(m, CGE_RUN_EAGER);

    /* an index out of range names the node; a sequence of another dtype the input */
    idx = 2;
    assert_int_not_equal(cge_session_run_graph(s, 1, ins, 2, outs, 2), CGE_OK);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_META);
    assert_non_null(strstr(cge_last_error(), "position 2 is out of range for a sequence of 2"));
    idx = 0;
    cge_sequence *wrong = NULL;
    ok(cge_sequence_create(CGE_TYPE_SEQUENCE, CGE_I32, &wrong));
    ins[0].data = wrong;
    assert_int_not_equal(cge_session_run_graph(s, 1, ins, 2, outs, 2), CGE_OK);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_SESSION);
    assert_non_null(strstr(cge_last_error(), "is a sequence of int32; the graph declares a "
                                             "sequence of float32"));
    ins[0].data = NULL;
    assert_int_not_equal(cge_session_run_graph(s, 1, ins, 2, outs, 2), CGE_OK);
    assert_non_null(strstr(cge_last_error(), "its data must be a cge_sequence"));
    ins[0].data = in;
    outs[0].data = NULL;
    assert_int_not_equal(cge_session_run_graph(s, 1, ins, 2, outs, 2), CGE_OK);
    assert_non_null(strstr(cge_last_error(), "output 'u' is a sequence of float32"));
    cge_sequence_destroy(wrong);
    cge_sequence_destroy(in);
    cge_sequence_destroy(out);
    cge_session_destroy(s);
}

static void test_known_sequence_folds(void **state)
{
    (void)state;
    /* y = SequenceAt(SequenceConstruct(a, b), 1): b, with no sequence left */
    cge_graph *g = NULL;
    ok(cge_graph_create("fold", &g));
    cge_shape s2 = CGE_SHAPE(2), sc = CGE_SCALAR;
    ok(cge_graph_add_input(g, "a", CGE_F32, &s2));
    ok(cge_graph_add_input(g, "b", CGE_F32, &s2));
    int64_t one = 1;
    ok(cge_graph_add_constant(g, "one", CGE_I64, &sc, &one, sizeof one));
    const char *c_in[2] = {"a", "b"}, *c_out[1] = {"s"};
    ok(cge_graph_add_node(g, "SequenceConstruct", NULL, "mk", c_in, 2, c_out, 1, NULL));
    const char *at_in[2] = {"s", "one"}, *at_out[1] = {"y"};
    ok(cge_graph_add_node(g, "SequenceAt", NULL, "at", at_in, 2, at_out, 1, NULL));
    ok(cge_graph_add_output(g, "y"));
    cge_plan *p = NULL;
    ok(cge_compile(g, NULL, 0, NULL, &p));   /* not allow_incomplete: a full plan */
    assert_true(cge_plan_is_complete(p));
    const cge_graph *pg = cge_plan_graph(p);
    assert_false(cge_graph_has_non_tensor_values(pg));
    for (int32_t i = 0; i < cge_graph_num_nodes(pg); i++)
        assert_null(strstr(cge_node_op_type(cge_graph_node(pg, i)), "Sequence"));
    cge_plan_destroy(p);
    cge_graph_destroy(g);

    /* a sequence input cannot fold: only a node-by-node run carries it */
    g = insert_graph();
    assert_int_not_equal(cge_compile(g, NULL, 0, NULL, &p), CGE_OK);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_GRAPH);
    assert_non_null(strstr(cge_last_error(), "sequence or optional values"));
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_container),
        cmocka_unit_test(test_copies_share_elements),
        cmocka_unit_test(test_session_sequence_io),
        cmocka_unit_test(test_known_sequence_folds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
