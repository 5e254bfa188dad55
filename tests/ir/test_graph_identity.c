/* A graph's identity for caches outside it (the If node's branch memo): every
 * graph gets its own uid, even at an address a destroyed graph had, clones
 * included; the revision moves with every change to a node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cge/graph.h"
#include "ir/graph_identity.h"

static cge_graph *tiny(void)
{
    cge_graph *g = NULL;
    cge_shape s = CGE_SHAPE(4);
    const char *in = "x", *out = "y";
    assert_int_equal(cge_graph_create("tiny", &g), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "LeakyRelu", "", "lr", &in, 1, &out, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

static void test_uid_survives_address_reuse(void **state)
{
    (void)state;
    enum { N = 16 };
    uint64_t uids[N];
    for (int i = 0; i < N; i++) {
        cge_graph *g = tiny();
        uids[i] = cge__graph_uid(g);
        assert_true(uids[i] != 0);
        for (int j = 0; j < i; j++)
            assert_true(uids[i] != uids[j]);
        cge_graph_destroy(g);
    }
    /* malloc hands a freed block of the same size straight back, so these
     * graphs mostly share one address: the case a pointer key gets wrong */
    assert_int_equal(cge__graph_uid(NULL), 0);
}

static void test_clone_has_its_own_uid(void **state)
{
    (void)state;
    cge_graph *g = tiny(), *c = NULL;
    assert_int_equal(cge_graph_clone(g, &c), CGE_OK);
    assert_true(cge__graph_uid(c) != 0);
    assert_true(cge__graph_uid(c) != cge__graph_uid(g));
    cge_graph_destroy(c);
    cge_graph_destroy(g);
}

static void test_revision_moves_with_attributes(void **state)
{
    (void)state;
    cge_graph *g = tiny();
    uint64_t r0 = cge__graph_revision(g);
    cge_node *n = cge_graph_find_node(g, "lr");
    assert_non_null(n);
    cge_attr alpha = CGE_ATTR_F("alpha", 0.5f);
    assert_int_equal(cge_attrs_set(cge_node_attrs(n), &alpha), CGE_OK);
    uint64_t r1 = cge__graph_revision(g);
    assert_true(r1 > r0);
    assert_int_equal(cge__graph_uid(g), cge__graph_uid(g)); /* the identity stays */
    assert_int_equal(cge__graph_revision(NULL), 0);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uid_survives_address_reuse),
        cmocka_unit_test(test_clone_has_its_own_uid),
        cmocka_unit_test(test_revision_moves_with_attributes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
