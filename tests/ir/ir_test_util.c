/* Helpers linked into every IR test (see ir_test_util.h). */
#include <stdlib.h>
#include <string.h>

#include "ir_test_util.h"

cge_graph *ir_build_x2y(void)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("x_plus_2y", &g), CGE_OK);
    assert_non_null(g);
    cge_shape s = CGE_SHAPE(8, 2048);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "y", CGE_F32, &s), CGE_OK);
    const char *in0[] = {"x", "y"}, *out0[] = {"t0"};
    const char *in1[] = {"t0", "y"}, *out1[] = {"z"};
    assert_int_equal(cge_graph_add_node(g, "Add", NULL, "Add0", in0, 2, out0, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "Add1", in1, 2, out1, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "z"), CGE_OK);
    return g;
}

char *ir_dump(cge_status (*fn)(const cge_graph *, FILE *), const cge_graph *g)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(fn(g, f), CGE_OK);
    assert_int_equal(fclose(f), 0);
    assert_non_null(buf);
    return buf;
}

void ir_assert_error(cge_status st, cge_status expect, const char *needle1, const char *needle2)
{
    const char *msg = cge_last_error();
    if (st != expect || strncmp(msg, "[graph] ", 8) != 0 || (needle1 && !strstr(msg, needle1)) ||
        (needle2 && !strstr(msg, needle2)))
        fail_msg("expected %s with '%s' and '%s'; got %s: %s", cge_status_name(expect),
                 needle1 ? needle1 : "", needle2 ? needle2 : "", cge_status_name(st), msg);
}
