/* Symbolic values in inference: shape computations on symbolic shapes
 * (Shape(x)[0] of a [N,3,4,4] x) are carried element by element, so the
 * Reshape/Expand/ConstantOfShape they feed keep N; sizes computed from a
 * symbol become unknown; compiles for concrete shapes give the right data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "ct_util.h"

static void assert_shape(const cge_graph *g, const char *name, cge_shape want)
{
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(g, name, &d), CGE_OK);
    char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
    if (!cge_shape_equal(&d.shape, &want))
        fail_msg("%s: inferred %s, expected %s", name,
                 cge_graph_shape_str(g, &d.shape, a, sizeof a),
                 cge_graph_shape_str(g, &want, b, sizeof b));
}

static void scalar_i64(cge_graph *g, const char *name, int64_t v)
{
    cge_shape s = CGE_SCALAR;
    assert_int_equal(cge_graph_add_constant(g, name, CGE_I64, &s, &v, sizeof v), CGE_OK);
}

static cge_node *node3(cge_graph *g, const char *op, const char *a, const char *b, const char *c,
                       const char *out)
{
    const char *ins[3] = {a, b, c};
    return ct_node_n(g, op, "", ins, 3, &out, 1);
}

static void concat0(cge_graph *g, const char *a, const char *b, const char *out)
{
    assert_int_equal(cge_node_set_int(ct_node(g, "Concat", a, b, out), "axis", 0), CGE_OK);
}

/* x.view(x.size(0), -1) as torch.onnx exports it (opset 13): Shape, Gather
 * of a scalar index, Unsqueeze, Concat with [-1], Reshape; and the Slice
 * spelling (Shape(x)[0:1]) of the same. */
static cge_graph *flatten_graph(int64_t *n_out)
{
    cge_graph *g = ct_graph("sym_flatten");
    int64_t N = cge_graph_dim_symbol(g, "N");
    *n_out = N;
    ct_input(g, "x", CGE_SHAPE(N, 3, 4, 4));
    scalar_i64(g, "zero", 0);
    int64_t ax0[1] = {0}, m1[1] = {-1}, one[1] = {1}, zero1[1] = {0};
    ct_const_i64(g, "ax0", ax0, 1);
    ct_const_i64(g, "m1", m1, 1);
    ct_const_i64(g, "one1", one, 1);
    ct_const_i64(g, "zero1", zero1, 1);
    ct_node(g, "Shape", "x", NULL, "shp");
    ct_node(g, "Gather", "shp", "zero", "n");          /* scalar: N */
    ct_node(g, "Unsqueeze", "n", "ax0", "n1");         /* [N] */
    concat0(g, "n1", "m1", "target");        /* [N, -1] */
    ct_node(g, "Reshape", "x", "target", "y");
    /* the Slice spelling */
    node3(g, "Slice", "shp", "zero1", "one1", "n1s");  /* [N] */
    concat0(g, "n1s", "m1", "target_s");
    ct_node(g, "Reshape", "x", "target_s", "ys");
    ct_output(g, "y");
    ct_output(g, "ys");
    return g;
}

static void test_flatten_keeps_symbol(void **state)
{
    (void)state;
    int64_t N;
    cge_graph *g = flatten_graph(&N);
    assert_int_equal(cge_graph_infer_values(g), CGE_OK);
    assert_shape(g, "y", CGE_SHAPE(N, 48));
    assert_shape(g, "ys", CGE_SHAPE(N, 48));
    assert_string_equal(cge_graph_dim_symbol_name(g, N), "N");
    /* the shape values themselves stay int64 tensors of known length */
    assert_shape(g, "target", CGE_SHAPE(2));
    cge_graph_destroy(g);
}

/* A compile for N = 2 runs the same graph: [2,48], the data unchanged. */
static void test_flatten_compiles_concrete(void **state)
{
    (void)state;
    int64_t N;
    cge_graph *g = flatten_graph(&N);
    float x[2 * 48];
    for (int i = 0; i < 96; i++)
        x[i] = (float)i * 0.5f - 3.0f;
    cge_tensor in[1] = {{.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 3, 4, 4),
                         .data = x, .bytes = sizeof x}};
    for (int level = CGE_OPT_NONE; level <= CGE_OPT_FUSE; level++) {
        cge_tensor out[2];
        cge_compile_options o = ct_opts((cge_opt_level)level);
        cge_plan *p = NULL;
        if (ct_compile_run(g, &o, in, 1, out, 2, &p) != CGE_OK)
            fail_msg("level %d: %s", level, cge_last_error());
        for (int k = 0; k < 2; k++) {
            assert_int_equal(out[k].shape.rank, 2);
            assert_int_equal(out[k].shape.dims[0], 2);
            assert_int_equal(out[k].shape.dims[1], 48);
            assert_memory_equal(out[k].data, x, sizeof x);
        }
        ct_free_outputs(out, 2);
        cge_plan_destroy(p);
    }
    cge_graph_destroy(g);
}

/* Expand and ConstantOfShape to Shape(y) of a symbolic y, and a symbolic
 * value with known entries among the symbols (Shape(v) = [N,M,4]). */
static void test_expand_to_symbolic_shape(void **state)
{
    (void)state;
    cge_graph *g = ct_graph("sym_expand");
    int64_t N = cge_graph_dim_symbol(g, "N"), M = cge_graph_dim_symbol(g, "M");
    ct_input(g, "y", CGE_SHAPE(N, 4));
    ct_input(g, "c", CGE_SHAPE(1, 4));
    ct_input(g, "v", CGE_SHAPE(N, M, 4));
    ct_input(g, "r", CGE_SHAPE(1, 1, 1));
    ct_node(g, "Shape", "y", NULL, "ys");
    ct_node(g, "Expand", "c", "ys", "e");              /* [N,4] */
    ct_node(g, "ConstantOfShape", "ys", NULL, "z");    /* [N,4] */
    ct_node(g, "Shape", "v", NULL, "vs");
    ct_node(g, "Expand", "r", "vs", "ev");             /* [N,M,4] */
    cge_node *s = ct_node(g, "Shape", "v", NULL, "vs12");
    assert_int_equal(cge_node_set_int(s, "start", 1), CGE_OK);
    ct_node(g, "ConstantOfShape", "vs12", NULL, "z12"); /* [M,4] */
    /* Gather of 1-D indices, Cast to int64, Identity: [N,4]; Size of [N,1]: N */
    int64_t i02[2] = {0, 2}, ax0[1] = {0};
    ct_const_i64(g, "i02", i02, 2);
    ct_const_i64(g, "ax0", ax0, 1);
    ct_node(g, "Gather", "vs", "i02", "g02");
    cge_node *cast = ct_node(g, "Cast", "g02", NULL, "g02c");
    assert_int_equal(cge_node_set_int(cast, "to", CGE_I64), CGE_OK);
    ct_node(g, "Identity", "g02c", NULL, "g02i");
    ct_node(g, "ConstantOfShape", "g02i", NULL, "z02");  /* [N,4] */
    ct_input(g, "n1", CGE_SHAPE(N, 1));
    ct_node(g, "Size", "n1", NULL, "sz");
    ct_node(g, "Unsqueeze", "sz", "ax0", "szv");
    ct_node(g, "ConstantOfShape", "szv", NULL, "zsz");   /* [N] */
    ct_output(g, "e");
    ct_output(g, "z");
    ct_output(g, "ev");
    ct_output(g, "z12");
    ct_output(g, "z02");
    ct_output(g, "zsz");
    assert_int_equal(cge_graph_infer_values(g), CGE_OK);
    assert_shape(g, "z02", CGE_SHAPE(N, 4));
    assert_shape(g, "zsz", CGE_SHAPE(N));
    assert_shape(g, "e", CGE_SHAPE(N, 4));
    assert_shape(g, "z", CGE_SHAPE(N, 4));
    assert_shape(g, "ev", CGE_SHAPE(N, M, 4));
    assert_shape(g, "z12", CGE_SHAPE(M, 4));

    /* concrete: N = 3, M = 2 */
    float c[4] = {1, 2, 3, 4}, y[12] = {0}, v[24] = {0}, r[1] = {7}, n1[3] = {0};
    cge_tensor in[5] = {
        {.name = "y", .dtype = CGE_F32, .shape = CGE_SHAPE(3, 4), .data = y, .bytes = sizeof y},
        {.name = "c", .dtype = CGE_F32, .shape = CGE_SHAPE(1, 4), .data = c, .bytes = sizeof c},
        {.name = "v", .dtype = CGE_F32, .shape = CGE_SHAPE(3, 2, 4), .data = v, .bytes = sizeof v},
        {.name = "r", .dtype = CGE_F32, .shape = CGE_SHAPE(1, 1, 1), .data = r, .bytes = sizeof r},
        {.name = "n1", .dtype = CGE_F32, .shape = CGE_SHAPE(3, 1), .data = n1, .bytes = sizeof n1}};
    cge_tensor out[6];
    cge_compile_options o = ct_opts(CGE_OPT_FUSE);
    cge_plan *p = NULL;
    assert_int_equal(ct_compile_run(g, &o, in, 5, out, 6, &p), CGE_OK);
    assert_true(cge_shape_equal(&out[4].shape, &CGE_SHAPE(3, 4)));
    assert_true(cge_shape_equal(&out[5].shape, &CGE_SHAPE(3)));
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(3, 4)));
    assert_true(cge_shape_equal(&out[2].shape, &CGE_SHAPE(3, 2, 4)));
    assert_true(cge_shape_equal(&out[3].shape, &CGE_SHAPE(2, 4)));
    const float *e = out[0].data, *ev = out[2].data;
    for (int i = 0; i < 12; i++)
        assert_float_equal(e[i], c[i % 4], 0);
    for (int i = 0; i < 24; i++)
        assert_float_equal(ev[i], 7.0f, 0);
    ct_free_outputs(out, 6);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

/* Sizes computed from a symbol are unknown, never the symbol: 2*N is no
 * dim of this graph. Known entries next to it are still carried ([?,24]),
 * an exact identity (N*1) keeps N, and an entry that is a known number
 * (Shape(x)[1] = 3) becomes plain data that every meta reads (Range). */
static void test_computed_sizes_not_carried(void **state)
{
    (void)state;
    cge_graph *g = ct_graph("sym_mul");
    int64_t N = cge_graph_dim_symbol(g, "N");
    const int64_t D = CGE_DIM_DYNAMIC;
    ct_input(g, "x", CGE_SHAPE(N, 3, 4, 4));
    scalar_i64(g, "zero", 0);
    scalar_i64(g, "one", 1);
    scalar_i64(g, "two", 2);
    int64_t ax0[1] = {0}, k24[1] = {24}, m1[1] = {-1};
    ct_const_i64(g, "ax0", ax0, 1);
    ct_const_i64(g, "k24", k24, 1);
    ct_const_i64(g, "m1", m1, 1);
    ct_node(g, "Shape", "x", NULL, "shp");
    ct_node(g, "Gather", "shp", "zero", "n");
    ct_node(g, "Mul", "n", "two", "n2");                /* 2N: unknown */
    ct_node(g, "Unsqueeze", "n2", "ax0", "n2v");
    concat0(g, "n2v", "k24", "t24");          /* [2N, 24] */
    ct_node(g, "Reshape", "x", "t24", "y24");           /* [?, 24] */
    concat0(g, "n2v", "m1", "tm1");           /* [2N, -1] */
    ct_node(g, "Reshape", "x", "tm1", "ym1");           /* [?, ?]: -1 not solvable */
    ct_node(g, "Mul", "n", "one", "n_1");               /* N*1 = N */
    ct_node(g, "Unsqueeze", "n_1", "ax0", "n_1v");
    concat0(g, "n_1v", "m1", "tn1");
    ct_node(g, "Reshape", "x", "tn1", "yn1");           /* [N, 48] */
    ct_node(g, "Gather", "shp", "one", "c");            /* 3, known */
    node3(g, "Range", "zero", "c", "one", "rng");       /* [3] */
    node3(g, "Range", "zero", "n", "one", "rngn");      /* Range does not read symbols: [?] */
    const char *outs[] = {"y24", "ym1", "yn1", "rng", "rngn"};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        ct_output(g, outs[i]);
    assert_int_equal(cge_graph_infer_values(g), CGE_OK);
    assert_shape(g, "y24", CGE_SHAPE(D, 24));
    assert_shape(g, "ym1", CGE_SHAPE(D, D));
    assert_shape(g, "yn1", CGE_SHAPE(N, 48));
    assert_shape(g, "rng", CGE_SHAPE(3));
    assert_shape(g, "rngn", CGE_SHAPE(D));

    /* concrete: N = 2 -> y24 [4,24], ym1 [4,12] */
    float x[96];
    for (int i = 0; i < 96; i++)
        x[i] = (float)i;
    cge_tensor in[1] = {{.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 3, 4, 4),
                         .data = x, .bytes = sizeof x}};
    cge_tensor out[5];
    cge_compile_options o = ct_opts(CGE_OPT_FUSE);
    cge_plan *p = NULL;
    assert_int_equal(ct_compile_run(g, &o, in, 1, out, 5, &p), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(4, 24)));
    assert_true(cge_shape_equal(&out[1].shape, &CGE_SHAPE(4, 24)));
    assert_true(cge_shape_equal(&out[2].shape, &CGE_SHAPE(2, 48)));
    assert_true(cge_shape_equal(&out[4].shape, &CGE_SHAPE(2)));
    assert_memory_equal(out[0].data, x, sizeof x);
    const int64_t *rn = out[4].data;
    assert_int_equal(rn[0], 0);
    assert_int_equal(rn[1], 1);
    ct_free_outputs(out, 5);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

/* Anonymous dims travel as unknown entries: Reshape(x, [Shape(x)[0], 48])
 * of a [?,3,4,4] x is [?,48], where the entry 48 used to be lost with the
 * whole value. The -1 spelling stays [?,?]: nothing cancels an anonymous
 * dim. */
static void test_anonymous_dims(void **state)
{
    (void)state;
    cge_graph *g = ct_graph("sym_anon");
    const int64_t D = CGE_DIM_DYNAMIC;
    ct_input(g, "x", CGE_SHAPE(D, 3, 4, 4));
    int64_t zero1[1] = {0}, one1[1] = {1}, k48[1] = {48}, m1[1] = {-1};
    ct_const_i64(g, "zero1", zero1, 1);
    ct_const_i64(g, "one1", one1, 1);
    ct_const_i64(g, "k48", k48, 1);
    ct_const_i64(g, "m1", m1, 1);
    ct_node(g, "Shape", "x", NULL, "shp");
    node3(g, "Slice", "shp", "zero1", "one1", "n1");
    concat0(g, "n1", "k48", "t48");
    ct_node(g, "Reshape", "x", "t48", "y48");
    concat0(g, "n1", "m1", "tm1");
    ct_node(g, "Reshape", "x", "tm1", "ym1");
    ct_output(g, "y48");
    ct_output(g, "ym1");
    assert_int_equal(cge_graph_infer_values(g), CGE_OK);
    assert_shape(g, "y48", CGE_SHAPE(D, 48));
    assert_shape(g, "ym1", CGE_SHAPE(D, D));
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flatten_keeps_symbol),
        cmocka_unit_test(test_flatten_compiles_concrete),
        cmocka_unit_test(test_expand_to_symbolic_shape),
        cmocka_unit_test(test_computed_sizes_not_carried),
        cmocka_unit_test(test_anonymous_dims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
