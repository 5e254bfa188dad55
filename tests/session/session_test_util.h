/* Helpers the session tests share (cmocka asserts inside): a node with one
 * output, a session of two threads holding graph 1, its graph stats, and
 * the repeating patterns the weight tests fill their tensors with. Include
 * after <cmocka.h>. */
#ifndef CGE_TESTS_SESSION_TEST_UTIL_H
#define CGE_TESTS_SESSION_TEST_UTIL_H

#include <stdbool.h>
#include <stdlib.h>

#include "cge/cge.h"

static inline void st_add_node(cge_graph *g, const char *op, const char *name, const char **ins,
                               int32_t ni, const char *out, cge_node **node)
{
    const char *outs[] = {out};
    assert_int_equal(cge_graph_add_node(g, op, "", name, ins, ni, outs, 1, node), CGE_OK);
}

/* A two-thread session holding `g` as graph 1; with `keep_packed`, one that
 * keeps weights once packed ($CGE_KEEP_PACKED_WEIGHTS=1, read at creation). */
static inline cge_session *st_session(const cge_graph *g, bool keep_packed)
{
    if (keep_packed)
        setenv("CGE_KEEP_PACKED_WEIGHTS", "1", 1);
    cge_session_options so = {.num_threads = 2};
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    if (keep_packed)
        unsetenv("CGE_KEEP_PACKED_WEIGHTS");
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    return s;
}

static inline cge_session_graph_stats st_stats(const cge_session *s)
{
    cge_session_graph_stats st;
    assert_int_equal(cge_session_get_graph_stats(s, 1, &st), CGE_OK);
    return st;
}

/* v[i] = ((i * mul) % mod) * step + base: small exact values, no two
 * neighbours alike. */
static inline void st_fill(float *v, int64_t n, int mul, int mod, float step, float base)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((i * mul) % mod) * step + base;
}

#endif
