/* Shape inference with symbolic dimensions: symbols pass through copies
 * (elementwise, Transpose, MatMul's M and N, Reshape's copied dims,
 * Flatten, Concat's other axes), broadcast by the rules of
 * cge_shape_broadcast, and become anonymous where sizes are computed; a
 * compile for concrete shapes replaces them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "ct_util.h"

static cge_shape desc_shape(const cge_graph *g, const char *name)
{
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(g, name, &d), CGE_OK);
    return d.shape;
}

static void assert_shape(const cge_graph *g, const char *name, cge_shape want)
{
    cge_shape got = desc_shape(g, name);
    char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
    if (!cge_shape_equal(&got, &want))
        fail_msg("%s: inferred %s, expected %s", name, cge_graph_shape_str(g, &got, a, sizeof a),
                 cge_graph_shape_str(g, &want, b, sizeof b));
}

static void test_propagation(void **state)
{
    (void)state;
    cge_graph *g = ct_graph("symbolic");
    int64_t N = cge_graph_dim_symbol(g, "N"), M = cge_graph_dim_symbol(g, "M");
    int64_t K = cge_graph_dim_symbol(g, "K");
    const int64_t D = CGE_DIM_DYNAMIC;
    ct_input(g, "a", CGE_SHAPE(N, 16));
    ct_input(g, "b", CGE_SHAPE(N, 16));
    ct_input(g, "c", CGE_SHAPE(1, 16));
    ct_input(g, "d", CGE_SHAPE(M, 16));
    ct_input(g, "e", CGE_SHAPE(4, 16));
    ct_input(g, "x", CGE_SHAPE(N, K));
    ct_input(g, "w", CGE_SHAPE(K, 8));
    ct_input(g, "v", CGE_SHAPE(N, 4, 4));
    ct_input(g, "q", CGE_SHAPE(D, 16));
    int64_t r3[3] = {0, 4, 4}, r2[2] = {0, -1}, r1[2] = {-1, 8};
    ct_const_i64(g, "r3", r3, 3);
    ct_const_i64(g, "r2", r2, 2);
    ct_const_i64(g, "r1", r1, 2);
    ct_node(g, "Add", "a", "b", "ab");          /* [N,16] + [N,16] */
    ct_node(g, "Add", "a", "c", "ac");          /* [N,16] + [1,16] */
    ct_node(g, "Add", "a", "d", "ad");          /* [N,16] + [M,16] */
    ct_node(g, "Mul", "a", "e", "ae");          /* [N,16] * [4,16] */
    ct_node(g, "Sub", "a", "q", "aq");          /* [N,16] - [?,16] */
    ct_node(g, "MatMul", "x", "w", "xw");       /* [N,K] x [K,8] */
    ct_node(g, "Relu", "ab", NULL, "relu");
    cge_node *t = ct_node(g, "Transpose", "a", NULL, "at");
    int64_t perm[2] = {1, 0};
    assert_int_equal(cge_node_set_ints(t, "perm", perm, 2), CGE_OK);
    ct_node(g, "Reshape", "a", "r3", "a3");      /* [0,4,4] keeps N */
    ct_node(g, "Reshape", "v", "r2", "v2");      /* [0,-1]: N cancels, -1 is 16 */
    ct_node(g, "Reshape", "a", "r1", "a1");      /* [-1,8]: 2N, unnamed */
    ct_node(g, "Flatten", "v", NULL, "vf");
    cge_node *cat = ct_node(g, "Concat", "a", "b", "cat1");
    assert_int_equal(cge_node_set_int(cat, "axis", 1), CGE_OK);
    cat = ct_node(g, "Concat", "a", "d", "cat1m");
    assert_int_equal(cge_node_set_int(cat, "axis", 1), CGE_OK);
    cat = ct_node(g, "Concat", "a", "b", "cat0");
    assert_int_equal(cge_node_set_int(cat, "axis", 0), CGE_OK);
    const char *outs[] = {"relu", "ac", "ad", "ae", "aq", "xw", "at", "a3", "v2", "a1",
                          "vf", "cat1", "cat1m", "cat0"};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        ct_output(g, outs[i]);

    assert_int_equal(cge_graph_infer_values(g), CGE_OK);
    assert_shape(g, "ab", CGE_SHAPE(N, 16));
    assert_shape(g, "relu", CGE_SHAPE(N, 16));
    assert_shape(g, "ac", CGE_SHAPE(N, 16));
    assert_shape(g, "ad", CGE_SHAPE(D, 16));
    assert_shape(g, "ae", CGE_SHAPE(4, 16));
    assert_shape(g, "aq", CGE_SHAPE(D, 16));
    assert_shape(g, "xw", CGE_SHAPE(N, 8));
    assert_shape(g, "at", CGE_SHAPE(16, N));
    assert_shape(g, "a3", CGE_SHAPE(N, 4, 4));
    assert_shape(g, "v2", CGE_SHAPE(N, 16));
    assert_shape(g, "a1", CGE_SHAPE(D, 8));
    assert_shape(g, "vf", CGE_SHAPE(N, 16));
    assert_shape(g, "cat1", CGE_SHAPE(N, 32));
    assert_shape(g, "cat1m", CGE_SHAPE(D, 32));
    assert_shape(g, "cat0", CGE_SHAPE(D, 16));   /* N + N: computed, unnamed */

    /* the text dump names the symbols */
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    assert_int_equal(cge_graph_write_text(g, f), CGE_OK);
    fclose(f);
    if (!strstr(txt, "output xw: float32 [N,8]") || !strstr(txt, "output at: float32 [16,N]"))
        fail_msg("dump lacks symbol names:\n%s", txt);
    free(txt);
    cge_graph_destroy(g);
}

/* A compile for concrete shapes: symbols are replaced, results are right. */
static void test_compile_concrete(void **state)
{
    (void)state;
    cge_graph *g = ct_graph("symbolic_run");
    int64_t N = cge_graph_dim_symbol(g, "N");
    ct_input(g, "a", CGE_SHAPE(N, 4));
    ct_input(g, "b", CGE_SHAPE(N, 4));
    ct_node(g, "Add", "a", "b", "s");
    ct_node(g, "Relu", "s", NULL, "y");
    ct_output(g, "y");
    float a[12], b[12];
    for (int i = 0; i < 12; i++)
        a[i] = (float)i - 6.0f, b[i] = 1.0f;
    cge_tensor in[2] = {
        {.name = "a", .dtype = CGE_F32, .shape = CGE_SHAPE(3, 4), .data = a, .bytes = sizeof a},
        {.name = "b", .dtype = CGE_F32, .shape = CGE_SHAPE(3, 4), .data = b, .bytes = sizeof b}};
    cge_tensor out[1];
    cge_compile_options o = ct_opts(CGE_OPT_FUSE);
    cge_plan *p = NULL;
    assert_int_equal(ct_compile_run(g, &o, in, 2, out, 1, &p), CGE_OK);
    assert_int_equal(out[0].shape.rank, 2);
    assert_int_equal(out[0].shape.dims[0], 3);
    const float *y = out[0].data;
    for (int i = 0; i < 12; i++)
        assert_float_equal(y[i], a[i] + 1.0f > 0 ? a[i] + 1.0f : 0.0f, 0);
    ct_free_outputs(out, 1);
    cge_plan_destroy(p);
    /* N = 3 for a and N = 2 for b: refused, naming the symbol. */
    cge_shape shapes[2] = {CGE_SHAPE(3, 4), CGE_SHAPE(2, 4)};
    p = NULL;
    assert_int_equal(cge_compile(g, shapes, 2, &o, &p), CGE_ERR_SHAPE);
    assert_null(p);
    assert_non_null(strstr(cge_last_error(), "symbolic dimension 'N'"));
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_propagation),
        cmocka_unit_test(test_compile_concrete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
