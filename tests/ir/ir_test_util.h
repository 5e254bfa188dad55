/* Shared helpers of the IR tests: the x + 2y graph built by hand, dumping a
 * graph to a string, and checking [graph] error messages. */
#ifndef CGE_TESTS_IR_TEST_UTIL_H
#define CGE_TESTS_IR_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "cge/graph.h"

/* x, y: float32 [8,2048]; Add0 = Add(x, y) -> t0; Add1 = Add(t0, y) -> z;
 * output z. Nodes' outputs have no descriptors yet. */
cge_graph *ir_build_x2y(void);

/* Everything a dump function writes, as a malloc'd string. */
char *ir_dump(cge_status (*fn)(const cge_graph *, FILE *), const cge_graph *g);

/* Assert st == expect and that the last error is a [graph] error containing
 * each of the (up to two, NULL to skip) needles. */
void ir_assert_error(cge_status st, cge_status expect, const char *needle1, const char *needle2);

#endif
