/* DOT and text dumps: expected nodes, edges and labels, escaping of names
 * with quotes, backslashes and newlines, and write errors. */
#include <stdlib.h>
#include <string.h>

#include "ir_test_util.h"

/* A light DOT syntax check: strings closed on their line, escapes complete,
 * braces balanced outside strings, the file a single digraph. */
static void assert_dot_wellformed(const char *dot)
{
    assert_true(strncmp(dot, "digraph \"", 9) == 0);
    int depth = 0, saw_body = 0;
    bool in_str = false;
    for (const char *p = dot; *p; p++) {
        if (in_str) {
            if (*p == '\\') {
                p++;
                assert_true(*p != '\0' && *p != '\n');
            } else if (*p == '"') {
                in_str = false;
            } else {
                assert_true(*p != '\n');
            }
        } else if (*p == '"') {
            in_str = true;
        } else if (*p == '{') {
            depth++;
            saw_body = 1;
        } else if (*p == '}') {
            depth--;
            assert_true(depth >= 0);
        }
    }
    assert_false(in_str);
    assert_int_equal(depth, 0);
    assert_true(saw_body);
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("'%s' not found in:\n%s", needle, hay);
}

static void test_dot_x2y(void **state)
{
    (void)state;
    cge_graph *g = ir_build_x2y();
    cge_shape s = CGE_SHAPE(8, 2048);
    assert_int_equal(cge_graph_set_desc(g, "t0", CGE_F32, &s), CGE_OK);
    float w = 2;
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &CGE_SCALAR, &w, sizeof w), CGE_OK);
    char *dot = ir_dump(cge_graph_write_dot, g);
    assert_dot_wellformed(dot);
    assert_contains(dot, "digraph \"x_plus_2y\" {");
    /* Value ids follow the value table: x=0, y=1, t0=2, z=3, w=4. */
    assert_contains(dot, "v0 [shape=ellipse, label=\"x\\nfloat32 [8,2048]\"];");
    assert_contains(dot, "v4 [shape=note, label=\"w\\nfloat32 []\"];");
    assert_contains(dot, "n0 [shape=box, label=\"Add\\nAdd0\"];");
    assert_contains(dot, "n1 [shape=box, label=\"Add\\nAdd1\"];");
    assert_contains(dot, "v0 -> n0 [label=\"x\\nfloat32 [8,2048]\"];");
    assert_contains(dot, "v1 -> n0 [label=\"y\\nfloat32 [8,2048]\"];");
    assert_contains(dot, "n0 -> n1 [label=\"t0\\nfloat32 [8,2048]\"];");
    assert_contains(dot, "v1 -> n1 [label=\"y\\nfloat32 [8,2048]\"];");
    /* z has no descriptor yet: the edge carries only its name. */
    assert_contains(dot, "n1 -> o0 [label=\"z\"];");
    assert_contains(dot, "o0 [shape=ellipse, style=bold, label=\"z\"];");
    free(dot);
    cge_graph_destroy(g);
}

static void test_dot_escaping(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("the \"odd\" graph", &g), CGE_OK);
    cge_shape s = CGE_SHAPE(CGE_DIM_DYNAMIC, 3);
    assert_int_equal(cge_graph_add_input(g, "a\"b\\c\nd", CGE_I64, &s), CGE_OK);
    const char *in[] = {"a\"b\\c\nd", "missing"}, *out[] = {"o\"ut"};
    assert_int_equal(cge_graph_add_node(g, "Add", "my.dom", "say \"hi\"\\", in, 2, out, 1, NULL),
                     CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "o\"ut"), CGE_OK);
    char *dot = ir_dump(cge_graph_write_dot, g);
    assert_dot_wellformed(dot);
    assert_contains(dot, "digraph \"the \\\"odd\\\" graph\"");
    assert_contains(dot, "label=\"a\\\"b\\\\c\\nd\\nint64 [?,3]\"");
    assert_contains(dot, "label=\"my.dom::Add\\nsay \\\"hi\\\"\\\\\"");
    assert_contains(dot, "label=\"o\\\"ut\"");
    /* The undefined input is drawn dashed, once. */
    assert_contains(dot, "style=dashed, label=\"missing\\n(undefined)\"");
    const char *first = strstr(dot, "missing\\n(undefined)");
    assert_null(strstr(first + strlen("missing\\n(undefined)"), "(undefined)"));
    free(dot);
    /* The text listing keeps one line per node: such names are quoted. */
    char *txt = ir_dump(cge_graph_write_text, g);
    int lines = 0;
    for (const char *p = txt; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 4);
    assert_contains(txt, "input \"a\\\"b\\\\c\\nd\": int64 [?,3]\n");
    free(txt);
    cge_graph_destroy(g);
}

static void test_text(void **state)
{
    (void)state;
    cge_graph *g = ir_build_x2y();
    cge_node *a0 = cge_graph_node(g, 0);
    assert_int_equal(cge_node_set_float(a0, "alpha", 1.5f), CGE_OK);
    const int64_t axes[] = {0, 1};
    assert_int_equal(cge_node_set_ints(a0, "axes", axes, 2), CGE_OK);
    assert_int_equal(cge_node_set_string(a0, "mode", "m\"q"), CGE_OK);
    const char *in[] = {"x", ""}, *out[] = {"q", "r"};
    assert_int_equal(cge_graph_add_node(g, "Clip", "custom", "c", in, 2, out, 2, NULL), CGE_OK);
    cge_shape s = CGE_SHAPE(8, 2048);
    assert_int_equal(cge_graph_set_desc(g, "z", CGE_F32, &s), CGE_OK);
    char *txt = ir_dump(cge_graph_write_text, g);
    assert_contains(txt, "graph x_plus_2y (2 inputs, 1 outputs, 0 constants, 3 nodes)\n");
    assert_contains(txt, "input x: float32 [8,2048]\n");
    assert_contains(txt, "\nAdd0 = Add(x, y) -> t0 {alpha=1.5, axes=[0, 1], mode=\"m\\\"q\"}\n");
    assert_contains(txt, "\nAdd1 = Add(t0, y) -> z\n");
    assert_contains(txt, "\nc = custom::Clip(x, <absent>) -> q, r\n");
    assert_contains(txt, "\noutput z: float32 [8,2048]\n");
    free(txt);
    cge_graph_destroy(g);
}

static void test_write_errors(void **state)
{
    (void)state;
    cge_graph *g = ir_build_x2y();
    FILE *ro = fopen("/dev/null", "r");
    assert_non_null(ro);
    ir_assert_error(cge_graph_write_dot(g, ro), CGE_ERR_IO, "x_plus_2y", NULL);
    clearerr(ro);
    ir_assert_error(cge_graph_write_text(g, ro), CGE_ERR_IO, "x_plus_2y", NULL);
    fclose(ro);
    ir_assert_error(cge_graph_write_dot(g, NULL), CGE_ERR_INVALID_ARG, NULL, NULL);
    ir_assert_error(cge_graph_write_text(NULL, stdout), CGE_ERR_INVALID_ARG, NULL, NULL);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot_x2y),
        cmocka_unit_test(test_dot_escaping),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_write_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
