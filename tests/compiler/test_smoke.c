/* Smoke: compile x + 2y at every level and run the plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "ct_util.h"

static void test_x_plus_2y(void **state)
{
    cge_graph *g = ct_graph("x2y");
    ct_input(g, "x", CGE_SHAPE(8, 64));
    ct_input(g, "y", CGE_SHAPE(8, 64));
    ct_node(g, "Add", "x", "y", "t");
    ct_node(g, "Add", "t", "y", "z");
    ct_output(g, "z");
    for (int lvl = CGE_OPT_NONE; lvl <= CGE_OPT_LAYOUT; lvl++) {
        cge_compile_options o = ct_opts((cge_opt_level)lvl);
        int32_t steps = ct_assert_equivalent(g, &o, 0, 0.0);
        assert_int_equal(steps, lvl >= CGE_OPT_FUSE ? 1 : 2);
    }
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_x_plus_2y)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
