/* Each optimisation pass: the rewrite it makes, what it must leave alone, and
 * the same outputs before and after on random inputs (bit for bit for the
 * exact passes, within a few ulps for the fusions that round differently). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ct_util.h"

/* Only the named pass (and the mandatory ones) at the exact level. */
static cge_compile_options only(const char *pass)
{
    cge_compile_options o = ct_opts(CGE_OPT_NONE);
    o.enable = pass;
    return o;
}

static cge_plan *compile(const cge_graph *g, const cge_compile_options *o)
{
    cge_plan *p = NULL;
    if (cge_compile(g, NULL, 0, o, &p))
        fail_msg("compile: %s", cge_last_error());
    return p;
}

static int32_t count_with(const cge_graph *g, const cge_compile_options *o, const char *op)
{
    cge_plan *p = compile(g, o);
    int32_t n = ct_count_op(p, op);
    cge_plan_destroy(p);
    return n;
}

static int32_t steps_with(const cge_graph *g, const cge_compile_options *o)
{
    cge_plan *p = compile(g, o);
    int32_t n = cge_plan_num_steps(p);
    cge_plan_destroy(p);
    return n;
}

/* ---- fold_constants ------------------------------------------------------- */

static void test_fold_constants(void **state)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {0.5f, -1, 2, 8};
    cge_graph *g = ct_graph("fold");
    ct_input(g, "x", CGE_SHAPE(4));
    ct_const_f32(g, "a", CGE_SHAPE(4), a);
    ct_const_f32(g, "b", CGE_SHAPE(4), b);
    ct_node(g, "Add", "a", "b", "k");
    ct_node(g, "Exp", "k", NULL, "e");
    ct_node(g, "Mul", "x", "e", "y");
    ct_output(g, "y");
    cge_compile_options o = only("fold_constants,dce");
    assert_int_equal(steps_with(g, &o), 1);   /* Add and Exp folded */
    assert_int_equal(count_with(g, &o, "Mul"), 1);
    ct_assert_equivalent(g, &o, 0, 0.0);
    /* Above the size cap nothing folds. */
    o.fold_limit_bytes = 8;
    assert_int_equal(steps_with(g, &o), 3);
    cge_graph_destroy(g);
}

static void test_fold_shape_and_output(void **state)
{
    /* Shape of a static input becomes a constant, which lets Reshape's shape
     * be known; a folded graph output keeps its name. */
    float a[2] = {1, 2};
    cge_graph *g = ct_graph("fold_shape");
    ct_input(g, "x", CGE_SHAPE(2, 3));
    ct_input(g, "z", CGE_SHAPE(3, 2));
    ct_const_f32(g, "a", CGE_SHAPE(2), a);
    ct_node(g, "Shape", "z", NULL, "s");
    ct_node(g, "Reshape", "x", "s", "y");
    ct_node(g, "Neg", "a", NULL, "c");
    ct_output(g, "y");
    ct_output(g, "c");
    cge_compile_options o = only("fold_constants,dce");
    assert_int_equal(count_with(g, &o, "Shape"), 0);
    assert_int_equal(count_with(g, &o, "Neg"), 0);
    cge_plan *p = compile(g, &o);
    const cge_plan_value *c = &cge_plan_values(p)[cge_plan_output_value(p, 1)];
    assert_string_equal(c->name, "c");
    assert_int_equal(c->storage, CGE_STORAGE_CONSTANT);
    /* Without folding, y's shape is known only from computed values: no plan
     * can be built, so check the results directly. */
    cge_tensor in[2], out[2];
    ct_random_inputs(g, 3, in);
    assert_int_equal(ct_run_plan(p, in, 2, out, 2), CGE_OK);
    cge_shape s32 = CGE_SHAPE(3, 2);
    assert_true(cge_shape_equal(&out[0].shape, &s32));
    assert_memory_equal(out[0].data, in[0].data, 6 * sizeof(float));
    assert_true(((float *)out[1].data)[0] == -1.0f && ((float *)out[1].data)[1] == -2.0f);
    ct_free_outputs(in, 2);
    ct_free_outputs(out, 2);
    cge_plan_destroy(p);
    /* Without folding the Shape node stays, but inference carries its value
     * along, so y's shape is still known and a plan is built. */
    cge_compile_options none = ct_opts(CGE_OPT_NONE);
    cge_plan *q = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &none, &q), CGE_OK);
    assert_int_equal(ct_count_op(q, "Shape"), 1);
    const cge_plan_value *y = &cge_plan_values(q)[cge_plan_output_value(q, 0)];
    assert_true(cge_shape_equal(&y->shape, &s32));
    ct_random_inputs(g, 3, in);
    assert_int_equal(ct_run_plan(q, in, 2, out, 2), CGE_OK);
    assert_memory_equal(out[0].data, in[0].data, 6 * sizeof(float));
    ct_free_outputs(in, 2);
    ct_free_outputs(out, 2);
    cge_plan_destroy(q);
    cge_graph_destroy(g);
}

/* ---- remove_noops ------------------------------------------------------------- */

static void test_noops_removed(void **state)
{
    int64_t s1[2] = {6, 4}, s2[3] = {2, 3, 4};
    cge_graph *g = ct_graph("noops");
    ct_input(g, "x", CGE_SHAPE(2, 3, 4));
    ct_const_i64(g, "s1", s1, 2);
    ct_const_i64(g, "s2", s2, 3);
    ct_node(g, "Identity", "x", NULL, "a");
    cge_node *c = ct_node(g, "Cast", "a", NULL, "b");
    assert_int_equal(cge_node_set_int(c, "to", CGE_F32), CGE_OK);
    ct_node(g, "Reshape", "b", "s1", "r1");
    ct_node(g, "Reshape", "r1", "s2", "r2");       /* back to x's shape */
    cge_node *t1 = ct_node(g, "Transpose", "r2", NULL, "t1");
    cge_node *t2 = ct_node(g, "Transpose", "t1", NULL, "t2");
    int64_t p1[3] = {1, 2, 0}, p2[3] = {2, 0, 1};   /* p2 undoes p1 */
    assert_int_equal(cge_node_set_ints(t1, "perm", p1, 3), CGE_OK);
    assert_int_equal(cge_node_set_ints(t2, "perm", p2, 3), CGE_OK);
    ct_node(g, "Relu", "t2", NULL, "y");
    ct_output(g, "y");
    cge_compile_options o = only("remove_noops,dce");
    assert_int_equal(steps_with(g, &o), 1);
    assert_int_equal(count_with(g, &o, "Relu"), 1);
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
}

static void test_noops_kept(void **state)
{
    /* A real Cast, a Transpose pair that does not cancel (composed into one),
     * and an Identity from a graph input to a graph output stay. */
    cge_graph *g = ct_graph("noops_kept");
    ct_input(g, "x", CGE_SHAPE(2, 3, 4));
    cge_node *c = ct_node(g, "Cast", "x", NULL, "i");
    assert_int_equal(cge_node_set_int(c, "to", CGE_I32), CGE_OK);
    cge_node *back = ct_node(g, "Cast", "i", NULL, "f");
    assert_int_equal(cge_node_set_int(back, "to", CGE_F32), CGE_OK);
    cge_node *t1 = ct_node(g, "Transpose", "f", NULL, "t1");
    cge_node *t2 = ct_node(g, "Transpose", "t1", NULL, "y");
    int64_t p1[3] = {1, 2, 0}, p2[3] = {1, 2, 0};
    assert_int_equal(cge_node_set_ints(t1, "perm", p1, 3), CGE_OK);
    assert_int_equal(cge_node_set_ints(t2, "perm", p2, 3), CGE_OK);
    ct_node(g, "Identity", "x", NULL, "x_copy");
    ct_output(g, "y");
    ct_output(g, "x_copy");
    cge_compile_options o = only("remove_noops,dce");
    assert_int_equal(count_with(g, &o, "Cast"), 2);
    assert_int_equal(count_with(g, &o, "Transpose"), 1);
    assert_int_equal(count_with(g, &o, "Identity"), 1);
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
}

static void test_noops_unit_dim_transpose(void **state)
{
    /* [1,6,4] -> [6,1,4] moves only the size-1 dim: a Reshape (a view of
     * its input's bytes); [1,6,4] -> [1,4,6] really moves data and stays a
     * Transpose. */
    for (int real = 0; real < 2; real++) {
        cge_graph *g = ct_graph("unit_transpose");
        ct_input(g, "x", CGE_SHAPE(1, 6, 4));
        ct_node(g, "Exp", "x", NULL, "e");
        cge_node *t = ct_node(g, "Transpose", "e", NULL, "t");
        int64_t p_unit[3] = {1, 0, 2}, p_real[3] = {0, 2, 1};
        assert_int_equal(cge_node_set_ints(t, "perm", real ? p_real : p_unit, 3), CGE_OK);
        ct_node(g, "Relu", "t", NULL, "y");
        ct_output(g, "y");
        cge_compile_options o = only("remove_noops,dce");
        assert_int_equal(count_with(g, &o, "Transpose"), real ? 1 : 0);
        assert_int_equal(count_with(g, &o, "Reshape"), real ? 0 : 1);
        ct_assert_equivalent(g, &o, 0, 0.0);
        cge_graph_destroy(g);
    }
}

static void test_noops_zero_pad(void **state)
{
    /* Pad by zeros (as PyTorch exports AvgPool2d) goes; a real Pad stays. */
    for (int real = 0; real < 2; real++) {
        int64_t pads[8] = {0, 0, 0, real, 0, 0, 0, 0};
        cge_graph *g = ct_graph("pad");
        ct_input(g, "x", CGE_SHAPE(1, 2, 3, 3));
        ct_const_i64(g, "pads", pads, 8);
        ct_node(g, "Exp", "x", NULL, "e");
        ct_node(g, "Pad", "e", "pads", "p");
        ct_node(g, "Relu", "p", NULL, "y");
        ct_output(g, "y");
        cge_compile_options o = only("remove_noops,dce");
        assert_int_equal(count_with(g, &o, "Pad"), real);
        ct_assert_equivalent(g, &o, 0, 0.0);
        cge_graph_destroy(g);
    }
}

static void test_noops_views_and_outputs(void **state)
{
    /* Squeeze/Unsqueeze pair, Expand to the same shape, Dropout in inference;
     * the last no-op writes a graph output: the producer takes its name. */
    int64_t ax[1] = {1}, shp[2] = {4, 5};
    cge_graph *g = ct_graph("views");
    ct_input(g, "x", CGE_SHAPE(4, 5));
    ct_const_i64(g, "ax", ax, 1);
    ct_const_i64(g, "shp", shp, 2);
    ct_node(g, "Exp", "x", NULL, "e");
    ct_node(g, "Unsqueeze", "e", "ax", "u");
    ct_node(g, "Squeeze", "u", "ax", "s");
    ct_node(g, "Expand", "s", "shp", "ex");
    ct_node(g, "Dropout", "ex", NULL, "y");
    ct_output(g, "y");
    cge_compile_options o = only("remove_noops,dce");
    cge_plan *p = compile(g, &o);
    assert_int_equal(cge_plan_num_steps(p), 1);
    assert_string_equal(cge_node_op_type(cge_plan_steps(p)[0].node), "Exp");
    assert_string_equal(cge_plan_values(p)[cge_plan_steps(p)[0].outputs[0]].name, "y");
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
}

/* ---- simplify_algebra ------------------------------------------------------------ */

static void test_algebra(void **state)
{
    float ones[3] = {1, 1, 1};
    cge_graph *g = ct_graph("algebra");
    ct_input(g, "x", CGE_SHAPE(2, 3));
    ct_const_f32(g, "one3", CGE_SHAPE(3), ones);
    ct_const_scalar(g, "one", 1.0f);
    ct_const_scalar(g, "nzero", -0.0f);
    ct_const_scalar(g, "pzero", 0.0f);
    ct_node(g, "Mul", "x", "one3", "a");    /* x*1 (broadcast [3]: x keeps its shape) */
    ct_node(g, "Add", "nzero", "a", "b");   /* -0 + x */
    ct_node(g, "Sub", "b", "pzero", "c");   /* x - 0 */
    ct_node(g, "Div", "c", "one", "d");     /* x / 1 */
    ct_node(g, "Neg", "d", NULL, "n1");
    ct_node(g, "Neg", "n1", NULL, "n2");    /* -(-x) */
    ct_node(g, "Add", "n2", "pzero", "y");  /* x + 0.0 is not x for x = -0.0: kept */
    ct_output(g, "y");
    cge_compile_options o = only("simplify_algebra,dce");
    cge_plan *p = compile(g, &o);
    assert_int_equal(cge_plan_num_steps(p), 1);
    assert_string_equal(cge_node_op_type(cge_plan_steps(p)[0].node), "Add");
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
}

static void test_algebra_keeps_widening(void **state)
{
    /* x [3] * ones [2,3] widens x: not an identity. */
    float ones[6] = {1, 1, 1, 1, 1, 1};
    cge_graph *g = ct_graph("widen");
    ct_input(g, "x", CGE_SHAPE(3));
    ct_const_f32(g, "ones", CGE_SHAPE(2, 3), ones);
    ct_node(g, "Mul", "x", "ones", "y");
    ct_output(g, "y");
    cge_compile_options o = only("simplify_algebra,dce");
    assert_int_equal(count_with(g, &o, "Mul"), 1);
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
}

/* ---- cse and dce ---------------------------------------------------------------------- */

static void test_cse(void **state)
{
    float c1[1] = {2}, c2[1] = {2};
    cge_graph *g = ct_graph("cse");
    ct_input(g, "x", CGE_SHAPE(16));
    ct_const_f32(g, "c1", CGE_SHAPE(1), c1);
    ct_const_f32(g, "c2", CGE_SHAPE(1), c2);    /* same value: merged */
    ct_node(g, "Mul", "x", "c1", "a1");
    ct_node(g, "Mul", "x", "c2", "a2");
    ct_node(g, "Exp", "a1", NULL, "e1");
    ct_node(g, "Exp", "a2", NULL, "e2");
    cge_node *l1 = ct_node(g, "LeakyRelu", "e1", NULL, "l1");
    cge_node *l2 = ct_node(g, "LeakyRelu", "e2", NULL, "l2");
    assert_int_equal(cge_node_set_float(l1, "alpha", 0.1f), CGE_OK);
    assert_int_equal(cge_node_set_float(l2, "alpha", 0.2f), CGE_OK);  /* differs: kept */
    ct_node(g, "Add", "l1", "l2", "y");
    ct_output(g, "y");
    cge_compile_options o = only("cse,dce");
    cge_plan *p = compile(g, &o);
    assert_int_equal(ct_count_op(p, "Mul"), 1);
    assert_int_equal(ct_count_op(p, "Exp"), 1);
    assert_int_equal(ct_count_op(p, "LeakyRelu"), 2);
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
}

static void test_dce(void **state)
{
    float big[64] = {0};
    cge_graph *g = ct_graph("dce");
    ct_input(g, "x", CGE_SHAPE(64));
    ct_const_f32(g, "unused", CGE_SHAPE(64), big);
    ct_node(g, "Exp", "x", NULL, "dead1");
    ct_node(g, "Neg", "dead1", NULL, "dead2");
    ct_node(g, "Relu", "x", NULL, "y");
    ct_output(g, "y");
    cge_compile_options o = only("dce");
    cge_plan *p = compile(g, &o);
    assert_int_equal(cge_plan_num_steps(p), 1);
    assert_int_equal(cge_plan_constant_bytes(p), 0);
    cge_plan_destroy(p);
    cge_compile_options none = ct_opts(CGE_OPT_NONE);
    assert_int_equal(steps_with(g, &none), 3);   /* nothing removed without the pass */
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
}

/* ---- fusions ------------------------------------------------------------------------------ */

static void test_fuse_elementwise(void **state)
{
    cge_graph *g = ct_graph("chain");
    ct_input(g, "x", CGE_SHAPE(3, 1000));
    ct_input(g, "b", CGE_SHAPE(3, 1000));
    ct_const_scalar(g, "half", 0.5f);
    ct_node(g, "Mul", "x", "half", "a");
    ct_node(g, "Add", "a", "b", "c");
    ct_node(g, "Tanh", "c", NULL, "d");
    ct_node(g, "Sigmoid", "d", NULL, "e");
    ct_node(g, "Gelu", "e", NULL, "f");
    ct_node(g, "Mul", "f", "x", "y");
    ct_output(g, "y");
    cge_compile_options o = only("fuse_elementwise");
    cge_plan *p = compile(g, &o);
    assert_int_equal(cge_plan_num_steps(p), 1);
    assert_int_equal(ct_count_op(p, "ElementwiseChain"), 1);
    /* Inputs x, b and the scalar: each read once. */
    assert_int_equal(cge_plan_steps(p)[0].num_inputs, 3);
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &o, 0, 0.0);   /* bit-identical */
    cge_graph_destroy(g);
}

static void test_fuse_elementwise_boundaries(void **state)
{
    /* A broadcast input ([C] against [N, C]) is not fusable; an intermediate
     * read twice ends a tree (its readers form their own chains). */
    float bias[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cge_graph *g = ct_graph("bounds");
    ct_input(g, "x", CGE_SHAPE(4, 8));
    ct_const_f32(g, "bias", CGE_SHAPE(8), bias);
    ct_node(g, "Add", "x", "bias", "a");     /* broadcast: alone */
    ct_node(g, "Exp", "a", NULL, "e");
    ct_node(g, "Neg", "e", NULL, "n");       /* e -> n: one tree */
    ct_node(g, "Relu", "n", NULL, "r1");     /* n read twice */
    ct_node(g, "Abs", "n", NULL, "r2");
    ct_node(g, "Add", "r1", "r2", "y");
    ct_output(g, "y");
    cge_compile_options o = only("fuse_elementwise");
    cge_plan *p = compile(g, &o);
    assert_int_equal(ct_count_op(p, "Add"), 1);
    assert_int_equal(ct_count_op(p, "ElementwiseChain"), 2);
    assert_int_equal(cge_plan_num_steps(p), 3);
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
}

static void add_gelu_pattern(cge_graph *g, const char *x, const char *y, int variant)
{
    char d[64], e[64], a[64], m[64];
    snprintf(d, sizeof d, "%s_d", y);
    snprintf(e, sizeof e, "%s_e", y);
    snprintf(a, sizeof a, "%s_a", y);
    snprintf(m, sizeof m, "%s_m", y);
    if (variant == 0)
        ct_node(g, "Div", x, "sqrt2", d);
    else
        ct_node(g, "Mul", x, "rsqrt2", d);
    ct_node(g, "Erf", d, NULL, e);
    ct_node(g, "Add", e, "one", a);
    if (variant == 0) {
        ct_node(g, "Mul", x, a, m);
        ct_node(g, "Mul", m, "half", y);
    } else {
        ct_node(g, "Mul", x, "half", m);
        ct_node(g, "Mul", m, a, y);
    }
}

static void test_fuse_gelu(void **state)
{
    cge_graph *g = ct_graph("gelu");
    ct_input(g, "x", CGE_SHAPE(4, 256));
    ct_const_scalar(g, "sqrt2", 1.4142135f);
    ct_const_scalar(g, "rsqrt2", 0.70710678f);
    ct_const_scalar(g, "one", 1.0f);
    ct_const_scalar(g, "half", 0.5f);
    add_gelu_pattern(g, "x", "g1", 0);
    add_gelu_pattern(g, "g1", "y", 1);
    ct_output(g, "y");
    cge_compile_options o = only("fuse_gelu,dce");
    cge_plan *p = compile(g, &o);
    assert_int_equal(cge_plan_num_steps(p), 2);
    assert_int_equal(ct_count_op(p, "Gelu"), 2);
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &o, 8, 1e-6);
    /* An intermediate read elsewhere keeps the pattern as it is. */
    ct_node(g, "Neg", "g1_e", NULL, "leak");
    ct_output(g, "leak");
    assert_int_equal(count_with(g, &o, "Gelu"), 1);
    cge_graph_destroy(g);
}

static void test_fuse_layernorm(void **state)
{
    /* A builtin: its absence is a regression, not a reason to skip. */
    if (!cge_op_find("", "LayerNormalization", 0))
        fail_msg("builtin LayerNormalization is not registered: %s", cge_last_error());
    float gamma[32], beta[32];
    for (int i = 0; i < 32; i++) {
        gamma[i] = 1.0f + 0.01f * (float)i;
        beta[i] = -0.5f + 0.03f * (float)i;
    }
    int64_t axes[1] = {-1};
    cge_graph *g = ct_graph("ln");
    ct_input(g, "x", CGE_SHAPE(4, 32));
    ct_const_f32(g, "gamma", CGE_SHAPE(32), gamma);
    ct_const_f32(g, "beta", CGE_SHAPE(32), beta);
    ct_const_scalar(g, "eps", 1e-5f);
    ct_const_scalar(g, "two", 2.0f);
    cge_node *m = ct_node(g, "ReduceMean", "x", NULL, "mean");
    ct_node(g, "Sub", "x", "mean", "d");
    ct_node(g, "Pow", "d", "two", "sq");
    cge_node *v = ct_node(g, "ReduceMean", "sq", NULL, "var");
    /* ReduceMean's axes: attribute (opset 13) or input (18): try both. */
    const cge_op_def *rm = cge_op_find("", "ReduceMean", 0);
    bool axes_input = false;
    for (int32_t i = 0; rm && i < rm->num_inputs; i++)
        axes_input |= !strcmp(rm->inputs[i].name, "axes");
    if (axes_input) {
        ct_const_i64(g, "axes", axes, 1);
        cge_graph_destroy(g);
        g = ct_graph("ln18");
        ct_input(g, "x", CGE_SHAPE(4, 32));
        ct_const_f32(g, "gamma", CGE_SHAPE(32), gamma);
        ct_const_f32(g, "beta", CGE_SHAPE(32), beta);
        ct_const_scalar(g, "eps", 1e-5f);
        ct_const_scalar(g, "two", 2.0f);
        ct_const_i64(g, "axes", axes, 1);
        ct_node(g, "ReduceMean", "x", "axes", "mean");
        ct_node(g, "Sub", "x", "mean", "d");
        ct_node(g, "Pow", "d", "two", "sq");
        ct_node(g, "ReduceMean", "sq", "axes", "var");
    } else {
        assert_int_equal(cge_node_set_ints(m, "axes", axes, 1), CGE_OK);
        assert_int_equal(cge_node_set_ints(v, "axes", axes, 1), CGE_OK);
    }
    ct_node(g, "Add", "var", "eps", "ve");
    ct_node(g, "Sqrt", "ve", NULL, "sd");
    ct_node(g, "Div", "d", "sd", "nrm");
    ct_node(g, "Mul", "nrm", "gamma", "sc");
    ct_node(g, "Add", "sc", "beta", "y");
    ct_output(g, "y");
    cge_compile_options o = only("fuse_layernorm,dce");
    cge_plan *p = compile(g, &o);
    assert_int_equal(cge_plan_num_steps(p), 1);
    assert_int_equal(ct_count_op(p, "LayerNormalization"), 1);
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &o, 64, 1e-5);
    cge_graph_destroy(g);
}

static void test_fuse_matmul_epilogue(void **state)
{
    float w[24 * 40], bias[40], w2[40 * 8];
    for (int i = 0; i < 24 * 40; i++)
        w[i] = (float)((i * 37) % 19) * 0.05f - 0.45f;
    for (int i = 0; i < 40; i++)
        bias[i] = (float)i * 0.1f - 2.0f;
    for (int i = 0; i < 40 * 8; i++)
        w2[i] = (float)((i * 11) % 13) * 0.07f - 0.4f;
    cge_graph *g = ct_graph("mm");
    ct_input(g, "x", CGE_SHAPE(2, 5, 24));
    ct_const_f32(g, "w", CGE_SHAPE(24, 40), w);
    ct_const_f32(g, "bias", CGE_SHAPE(40), bias);
    ct_const_f32(g, "w2", CGE_SHAPE(8, 40), w2);
    ct_node(g, "MatMul", "x", "w", "h");
    ct_node(g, "Add", "h", "bias", "hb");
    ct_node(g, "Relu", "hb", NULL, "r");
    int64_t s2[2] = {10, 40};
    ct_const_i64(g, "s2", s2, 2);
    ct_node(g, "Reshape", "r", "s2", "r2");
    const char *gin[2] = {"r2", "w2"}, *gout[1] = {"gm"};
    cge_node *gemm = ct_node_n(g, "Gemm", "", gin, 2, gout, 1);
    assert_int_equal(cge_node_set_int(gemm, "transB", 1), CGE_OK);
    ct_node(g, "Tanh", "gm", NULL, "y");
    ct_output(g, "y");
    cge_compile_options o = only("fuse_matmul_epilogue");
    cge_plan *p = compile(g, &o);
    assert_int_equal(ct_count_op(p, "FusedMatMul"), 2);
    assert_int_equal(ct_count_op(p, "Relu") + ct_count_op(p, "Tanh") + ct_count_op(p, "Add"), 0);
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &o, 4, 1e-6);
    cge_graph_destroy(g);
}

static void test_fuse_matmul_leaves_full_bias(void **state)
{
    /* A bias of [M, N] is no per-column bias; it has the output's shape, so
     * it becomes the epilogue's residual: no Add left, the same bits. */
    float w[16], bias[16];
    for (int i = 0; i < 16; i++) {
        w[i] = (float)i * 0.1f;
        bias[i] = (float)i;
    }
    cge_graph *g = ct_graph("mm_full");
    ct_input(g, "x", CGE_SHAPE(4, 4));
    ct_const_f32(g, "w", CGE_SHAPE(4, 4), w);
    ct_const_f32(g, "bias", CGE_SHAPE(4, 4), bias);
    ct_node(g, "MatMul", "x", "w", "h");
    ct_node(g, "Add", "h", "bias", "y");
    ct_output(g, "y");
    cge_compile_options o = only("fuse_matmul_epilogue");
    assert_int_equal(count_with(g, &o, "Add"), 0);
    assert_int_equal(count_with(g, &o, "FusedMatMul"), 1);
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
}

/* A transformer's residuals, x + proj(h) and x + act(proj(h)): the Add of a
 * tensor of the output's shape is the FusedMatMul's last epilogue operation,
 * bit for bit the unfused graph's, at decode (1 row), prefill and odd sizes
 * (N not a multiple of 16, K past one depth slice of 256); a broadcast Add
 * ([N] after the bias) and an Add of the product with itself stay Adds. */
static void test_fuse_matmul_residual(void **state)
{
    const int64_t dims[][3] = {{1, 24, 40}, {7, 24, 40}, {16, 300, 33}, {1, 1, 1}, {13, 17, 5}};
    for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++) {
        int64_t M = dims[t][0], K = dims[t][1], N = dims[t][2];
        float *w = malloc(sizeof(float) * (size_t)(K * N)), *bias = malloc(sizeof(float) * (size_t)N);
        for (int64_t i = 0; i < K * N; i++)
            w[i] = (float)((i * 37) % 19) * 0.05f - 0.45f;
        for (int64_t i = 0; i < N; i++)
            bias[i] = (float)i * 0.1f - 2.0f;
        /* Past one depth slice the fused bias is added to the first slice's
         * sums (rounding apart from the unfused Add, as before): there the
         * residual is checked without a bias. */
        for (int v = K > 256 ? 2 : 0; v < 4; v++) {
            int act = v & 1, with_bias = v < 2;
            cge_graph *g = ct_graph("mm_res");
            ct_input(g, "x", CGE_SHAPE(M, K));
            ct_input(g, "r", CGE_SHAPE(M, N));
            ct_const_f32(g, "w", CGE_SHAPE(K, N), w);
            ct_const_f32(g, "bias", CGE_SHAPE(N), bias);
            ct_node(g, "MatMul", "x", "w", "h");
            if (with_bias)
                ct_node(g, "Add", "h", "bias", "hb");
            if (act)
                ct_node(g, "Relu", with_bias ? "hb" : "h", NULL, "ha");
            /* the residual on the left, as x + f(x) is exported */
            ct_node(g, "Add", "r", act ? "ha" : with_bias ? "hb" : "h", "y");
            ct_output(g, "y");
            cge_compile_options o = only("fuse_matmul_epilogue");
            cge_plan *p = compile(g, &o);
            assert_int_equal(cge_plan_num_steps(p), 1);
            assert_int_equal(ct_count_op(p, "FusedMatMul"), 1);
            cge_plan_destroy(p);
            ct_assert_equivalent(g, &o, 0, 0.0);
            cge_graph_destroy(g);
        }
        free(w);
        free(bias);
    }
    /* Not residuals: a broadcast [N] operand, and y + y. */
    float w[8 * 4], b2[4] = {1, 2, 3, 4};
    for (int i = 0; i < 32; i++)
        w[i] = (float)i * 0.01f;
    cge_graph *g = ct_graph("mm_not_res");
    ct_input(g, "x", CGE_SHAPE(3, 8));
    ct_const_f32(g, "w", CGE_SHAPE(8, 4), w);
    ct_const_f32(g, "b2", CGE_SHAPE(4), b2);
    ct_node(g, "MatMul", "x", "w", "h");
    ct_node(g, "Add", "h", "b2", "hb");
    ct_node(g, "Add", "hb", "b2", "hc");
    ct_node(g, "Add", "hc", "hc", "y");
    ct_output(g, "y");
    cge_compile_options o = only("fuse_matmul_epilogue");
    assert_int_equal(count_with(g, &o, "Add"), 2);
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
}

static void test_fuse_conv_bn(void **state)
{
    const char *builtins[2] = {"Conv", "BatchNormalization"};
    for (int i = 0; i < 2; i++)
        if (!cge_op_find("", builtins[i], 0))
            fail_msg("builtin %s is not registered: %s", builtins[i], cge_last_error());
    float w[4 * 3 * 3 * 3], b[4], sc[4], sh[4], mean[4], var[4];
    for (int i = 0; i < 4 * 27; i++)
        w[i] = (float)((i * 7) % 11) * 0.1f - 0.5f;
    for (int c = 0; c < 4; c++) {
        b[c] = 0.1f * (float)c;
        sc[c] = 1.0f + 0.2f * (float)c;
        sh[c] = -0.3f * (float)c;
        mean[c] = 0.05f * (float)c;
        var[c] = 0.5f + 0.25f * (float)c;
    }
    cge_graph *g = ct_graph("convbn");
    ct_input(g, "x", CGE_SHAPE(1, 3, 8, 8));
    ct_const_f32(g, "w", CGE_SHAPE(4, 3, 3, 3), w);
    ct_const_f32(g, "b", CGE_SHAPE(4), b);
    ct_const_f32(g, "sc", CGE_SHAPE(4), sc);
    ct_const_f32(g, "sh", CGE_SHAPE(4), sh);
    ct_const_f32(g, "mean", CGE_SHAPE(4), mean);
    ct_const_f32(g, "var", CGE_SHAPE(4), var);
    const char *ci[3] = {"x", "w", "b"}, *co[1] = {"c"};
    cge_node *cv = ct_node_n(g, "Conv", "", ci, 3, co, 1);
    int64_t pads[4] = {1, 1, 1, 1};
    assert_int_equal(cge_node_set_ints(cv, "pads", pads, 4), CGE_OK);
    const char *bi[5] = {"c", "sc", "sh", "mean", "var"}, *bo[1] = {"y"};
    ct_node_n(g, "BatchNormalization", "", bi, 5, bo, 1);
    ct_output(g, "y");
    cge_compile_options o = only("fuse_conv_bn,dce");
    cge_plan *p = compile(g, &o);
    assert_int_equal(cge_plan_num_steps(p), 1);
    assert_int_equal(ct_count_op(p, "Conv"), 1);
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &o, 64, 1e-5);
    /* BN in training mode stays. */
    cge_node *bnn = cge_graph_producer(g, "y");
    assert_int_equal(cge_node_set_int(bnn, "training_mode", 1), CGE_OK);
    assert_int_equal(count_with(g, &o, "BatchNormalization"), 1);
    cge_graph_destroy(g);
}

/* ---- normalize -------------------------------------------------------------------------------- */

static void test_normalize(void **state)
{
    cge_graph *g = ct_graph("norm");
    ct_input(g, "x", CGE_SHAPE(2, 3, 4));
    cge_node *sm = ct_node(g, "Softmax", "x", NULL, "s");
    assert_int_equal(cge_node_set_int(sm, "axis", -1), CGE_OK);
    ct_node(g, "Gelu", "s", NULL, "y");
    ct_output(g, "y");
    cge_compile_options o = ct_opts(CGE_OPT_NONE);
    cge_plan *p = compile(g, &o);
    const cge_plan_step *st = cge_plan_steps(p);
    assert_int_equal(cge_attrs_get_int(cge_node_attrs_const(st[0].node), "axis", -9), 2);
    assert_string_equal(cge_attrs_get_string(cge_node_attrs_const(st[1].node), "approximate", "?"),
                        "none");
    cge_plan_destroy(p);
    o.disable = "normalize";
    p = compile(g, &o);
    assert_int_equal(cge_attrs_get_int(cge_node_attrs_const(cge_plan_steps(p)[0].node), "axis", -9), -1);
    cge_plan_destroy(p);
    cge_graph_destroy(g);

    /* Flatten's negative axis counts from the rank (-1 of rank 3 is 2), not
     * from rank + 1 as Unsqueeze's does: [2,3,4] flattens to [6,4]. */
    g = ct_graph("norm_flatten");
    ct_input(g, "x", CGE_SHAPE(2, 3, 4));
    cge_node *fl = ct_node(g, "Flatten", "x", NULL, "y");
    assert_int_equal(cge_node_set_int(fl, "axis", -1), CGE_OK);
    ct_output(g, "y");
    o = ct_opts(CGE_OPT_NONE);
    p = compile(g, &o);
    assert_int_equal(cge_attrs_get_int(cge_node_attrs_const(cge_plan_steps(p)[0].node), "axis", -9), 2);
    cge_shape want = CGE_SHAPE(6, 4);
    assert_true(cge_shape_equal(&cge_plan_values(p)[cge_plan_output_value(p, 0)].shape, &want));
    cge_plan_destroy(p);
    cge_graph_destroy(g);

    /* OneHot's axis counts the output's dims (rank + 1): -1 of indices
     * [3,4] with depth 5 is 2, giving [3,4,5] (not 1, giving [3,5,4]). */
    g = ct_graph("norm_onehot");
    cge_shape is = CGE_SHAPE(3, 4);
    assert_int_equal(cge_graph_add_input(g, "i", CGE_I64, &is), CGE_OK);
    int64_t depth = 5;
    ct_const_i64(g, "depth", &depth, 1);
    int64_t offv[2] = {0, 1};
    ct_const_i64(g, "values", offv, 2);
    cge_node *oh = NULL;
    const char *ins[3] = {"i", "depth", "values"}, *outs[1] = {"y"};
    assert_int_equal(cge_graph_add_node(g, "OneHot", "", "oh", ins, 3, outs, 1, &oh), CGE_OK);
    assert_int_equal(cge_node_set_int(oh, "axis", -1), CGE_OK);
    ct_output(g, "y");
    p = compile(g, &o);
    assert_int_equal(cge_attrs_get_int(cge_node_attrs_const(cge_plan_steps(p)[0].node), "axis", -9), 2);
    cge_shape want_oh = CGE_SHAPE(3, 4, 5);
    assert_true(cge_shape_equal(&cge_plan_values(p)[cge_plan_output_value(p, 0)].shape, &want_oh));
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

/* ---- everything together ---------------------------------------------------------------------- */

static void test_all_levels_equivalent(void **state)
{
    float w[16 * 16];
    for (int i = 0; i < 256; i++)
        w[i] = (float)((i * 13) % 17) * 0.02f - 0.16f;
    cge_graph *g = ct_graph("mix");
    ct_input(g, "x", CGE_SHAPE(8, 16));
    ct_const_f32(g, "w", CGE_SHAPE(16, 16), w);
    ct_const_scalar(g, "one", 1.0f);
    ct_node(g, "MatMul", "x", "w", "h");
    ct_node(g, "Identity", "h", NULL, "h2");
    ct_node(g, "Mul", "h2", "one", "h3");
    ct_node(g, "Sigmoid", "h3", NULL, "s");
    ct_node(g, "Mul", "h3", "s", "silu");
    ct_node(g, "MatMul", "x", "w", "h_dup");
    ct_node(g, "Add", "silu", "h_dup", "y");
    ct_output(g, "y");
    for (int lvl = CGE_OPT_NONE; lvl <= CGE_OPT_LAYOUT; lvl++) {
        cge_compile_options o = ct_opts((cge_opt_level)lvl);
        int32_t steps = ct_assert_equivalent(g, &o, 4, 1e-6);
        if (lvl >= CGE_OPT_EXACT)
            assert_true(steps <= 4);
    }
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_constants),
        cmocka_unit_test(test_fold_shape_and_output),
        cmocka_unit_test(test_noops_removed),
        cmocka_unit_test(test_noops_kept),
        cmocka_unit_test(test_noops_unit_dim_transpose),
        cmocka_unit_test(test_noops_zero_pad),
        cmocka_unit_test(test_noops_views_and_outputs),
        cmocka_unit_test(test_algebra),
        cmocka_unit_test(test_algebra_keeps_widening),
        cmocka_unit_test(test_cse),
        cmocka_unit_test(test_dce),
        cmocka_unit_test(test_fuse_elementwise),
        cmocka_unit_test(test_fuse_elementwise_boundaries),
        cmocka_unit_test(test_fuse_gelu),
        cmocka_unit_test(test_fuse_layernorm),
        cmocka_unit_test(test_fuse_matmul_epilogue),
        cmocka_unit_test(test_fuse_matmul_leaves_full_bias),
        cmocka_unit_test(test_fuse_matmul_residual),
        cmocka_unit_test(test_fuse_conv_bn),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_all_levels_equivalent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
