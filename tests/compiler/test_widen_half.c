/* Tests of optimize/widen_half: a float16 (or bfloat16) graph's nodes run on
 * float32's kernels (a FusedConv, a FusedMatMul), with Casts only where half
 * values enter and leave; graph inputs and outputs keep their names and
 * dtypes; a half value that a node left as it is reads (a Cast to half) or
 * that is a graph output stays half as well as feeding float32 readers; a
 * Cast the model writes to half still rounds; constants are widened once;
 * Loop and Scan bodies compute in float32 between Casts at their half
 * inputs and outputs, unless they make half values of their own. Results agree with the literal half computation (level 1:
 * the pass does not run) within half's rounding. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/op.h"
#include "ct_util.h"

static uint16_t to_half(cge_dtype dt, float v)
{
    return dt == CGE_F16 ? cge_f32_to_f16(v) : cge_f32_to_bf16(v);
}

static float from_half(cge_dtype dt, uint16_t h)
{
    return dt == CGE_F16 ? cge_f16_to_f32(h) : cge_bf16_to_f32(h);
}

static float value_at(int64_t i, int seed)
{
    return (float)((i * 37 + seed * 11) % 101) / 50.0f - 1.0f;
}

static void half_const(cge_graph *g, const char *name, cge_dtype dt, cge_shape shape, int seed,
                       float scale)
{
    int64_t n = cge_shape_numel(&shape);
    uint16_t *d = malloc(sizeof(uint16_t) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        d[i] = to_half(dt, value_at(i, seed) * scale);
    assert_int_equal(cge_graph_add_constant(g, name, dt, &shape, d, sizeof(uint16_t) * (size_t)n),
                     CGE_OK);
    free(d);
}

static cge_tensor half_input(cge_dtype dt, cge_shape shape, int seed)
{
    int64_t n = cge_shape_numel(&shape);
    uint16_t *d = malloc(sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        d[i] = to_half(dt, value_at(i, seed));
    return (cge_tensor){
        .dtype = dt, .shape = shape, .data = d, .bytes = sizeof(uint16_t) * (size_t)n};
}

/* Output `i` of plan `p` has dtype `dt`. */
static void output_dtype_is(const cge_plan *p, int32_t i, cge_dtype dt)
{
    const cge_plan_value *v = &cge_plan_values(p)[cge_plan_output_value(p, i)];
    assert_int_equal(v->dtype, dt);
}

/* Steps reading or writing a value of dtype dt, other than the Casts and
 * the layout's Reorders (a Cast of NHWC data writes NHWC half data). */
static int32_t steps_touching(const cge_plan *p, cge_dtype dt)
{
    int32_t c = 0;
    const cge_plan_value *vals = cge_plan_values(p);
    for (int32_t k = 0; k < cge_plan_num_steps(p); k++) {
        const cge_plan_step *s = &cge_plan_steps(p)[k];
        if (!strcmp(cge_node_op_type(s->node), "Cast") ||
            !strcmp(cge_node_op_type(s->node), "Reorder"))
            continue;
        bool touches = false;
        for (int32_t i = 0; i < s->num_inputs; i++)
            touches |= s->inputs[i] >= 0 && vals[s->inputs[i]].dtype == dt;
        for (int32_t i = 0; i < s->num_outputs; i++)
            touches |= s->outputs[i] >= 0 && vals[s->outputs[i]].dtype == dt;
        c += touches;
    }
    return c;
}

/* max |a - b| / max |b| over two half outputs. */
static double rel_diff(cge_dtype dt, const cge_tensor *a, const cge_tensor *b)
{
    int64_t n = cge_shape_numel(&b->shape);
    const uint16_t *x = a->data, *y = b->data;
    double scale = 1e-6, err = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(from_half(dt, y[i])));
    for (int64_t i = 0; i < n; i++)
        err = fmax(err, fabs((double)from_half(dt, x[i]) - from_half(dt, y[i])));
    return err / scale;
}

/* x [1,4,8,8] -> Conv(W [6,4,3,3], B) -> Relu -> r (also an output) ->
 * GlobalAveragePool -> Flatten -> MatMul(M [6,5]) -> Add(c) -> y */
static cge_graph *half_cnn(cge_dtype dt)
{
    cge_graph *g = ct_graph("half_cnn");
    cge_shape xs = CGE_SHAPE(1, 4, 8, 8);
    assert_int_equal(cge_graph_add_input(g, "x", dt, &xs), CGE_OK);
    half_const(g, "W", dt, (cge_shape)CGE_SHAPE(6, 4, 3, 3), 1, 0.3f);
    half_const(g, "B", dt, (cge_shape)CGE_SHAPE(6), 2, 0.1f);
    half_const(g, "M", dt, (cge_shape)CGE_SHAPE(6, 5), 3, 0.5f);
    half_const(g, "c", dt, (cge_shape)CGE_SHAPE(5), 4, 0.2f);
    const char *conv_in[3] = {"x", "W", "B"}, *conv_out = "cv";
    cge_node *conv = ct_node_n(g, "Conv", "", conv_in, 3, &conv_out, 1);
    int64_t pads[4] = {1, 1, 1, 1};
    assert_int_equal(cge_node_set_ints(conv, "pads", pads, 4), CGE_OK);
    ct_node(g, "Relu", "cv", NULL, "r");
    ct_node(g, "GlobalAveragePool", "r", NULL, "gp");
    ct_node(g, "Flatten", "gp", NULL, "fl");
    ct_node(g, "MatMul", "fl", "M", "mm");
    ct_node(g, "Add", "mm", "c", "y");
    ct_output(g, "y");
    ct_output(g, "r");
    return g;
}

static void compare_levels(cge_graph *g, cge_dtype dt, const cge_tensor *in, int32_t ni,
                           int32_t no, double tol, cge_plan **wide_plan)
{
    cge_compile_options lit = ct_opts(CGE_OPT_EXACT), wide = ct_opts(CGE_OPT_LAYOUT);
    cge_tensor o1[4], o3[4];
    cge_plan *p1 = NULL;
    if (ct_compile_run(g, &lit, in, ni, o1, no, &p1) ||
        ct_compile_run(g, &wide, in, ni, o3, no, wide_plan))
        fail_msg("%s", cge_last_error());
    assert_int_equal(ct_count_op(p1, "Cast"), 0); /* level 1: as the model says */
    for (int32_t i = 0; i < no; i++) {
        const cge_plan_value *v = &cge_plan_values(p1)[cge_plan_output_value(p1, i)];
        if (v->dtype != dt)
            continue;
        output_dtype_is(*wide_plan, i, dt);
        double e = rel_diff(dt, &o3[i], &o1[i]);
        if (e > tol)
            fail_msg("output %d: widened differs from the half computation by %g (> %g)", i, e,
                     tol);
    }
    cge_plan_destroy(p1);
    ct_free_outputs(o1, no);
    ct_free_outputs(o3, no);
}

static void test_cnn_runs_float32_kernels(void **state)
{
    (void)state;
    const cge_dtype dts[2] = {CGE_F16, CGE_BF16};
    for (int k = 0; k < 2; k++) {
        cge_dtype dt = dts[k];
        cge_graph *g = half_cnn(dt);
        cge_tensor in = half_input(dt, (cge_shape)CGE_SHAPE(1, 4, 8, 8), 5);
        cge_plan *p = NULL;
        /* half rounds every step at level 1: bf16 keeps 8 bits */
        compare_levels(g, dt, &in, 1, 2, dt == CGE_F16 ? 4e-3 : 3e-2, &p);
        /* the heavy nodes are float32 ones; half data only in the Casts:
         * x in, y and r out */
        assert_int_equal(steps_touching(p, dt), 0);
        assert_int_equal(ct_count_op(p, "Cast"), 3);
        const cge_plan_stats *st = cge_plan_get_stats(p);
        bool ran = false;
        for (int32_t i = 0; i < st->num_passes; i++)
            ran |= !strcmp(st->passes[i].name, "widen_half") && st->passes[i].nodes_after >
                                                                    st->passes[i].nodes_before;
        assert_true(ran);
        cge_plan_destroy(p);
        /* disabled by name: nothing changes */
        cge_compile_options off = ct_opts(CGE_OPT_LAYOUT);
        off.disable = "widen_half";
        cge_tensor o[2];
        assert_int_equal(ct_compile_run(g, &off, &in, 1, o, 2, &p), CGE_OK);
        assert_int_equal(ct_count_op(p, "Cast"), 0);
        assert_true(steps_touching(p, dt) > 0);
        cge_plan_destroy(p);
        ct_free_outputs(o, 2);
        free(in.data);
        cge_graph_destroy(g);
    }
}

/* A half value read by a float32 reader and by one left as it is (the
 * model's Cast to half: a no-op the later passes drop; an If reading it
 * through its body), and the model's own Casts: a float32 input made half
 * (rounded) before a MatMul, the product cast back to float32. */
static void test_mixed_readers_and_model_casts(void **state)
{
    (void)state;
    cge_graph *g = ct_graph("mixed");
    cge_shape xs = CGE_SHAPE(3, 4);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    cge_shape bs = CGE_SCALAR;
    assert_int_equal(cge_graph_add_input(g, "cond", CGE_BOOL, &bs), CGE_OK);
    half_const(g, "M", CGE_F16, (cge_shape)CGE_SHAPE(4, 4), 3, 0.5f);
    cge_node *c16 = ct_node(g, "Cast", "x", NULL, "h");
    assert_int_equal(cge_node_set_int(c16, "to", CGE_F16), CGE_OK);
    ct_node(g, "MatMul", "h", "M", "p");
    ct_node(g, "Tanh", "p", NULL, "t");
    cge_node *keep = ct_node(g, "Cast", "t", NULL, "t16");   /* half to half */
    assert_int_equal(cge_node_set_int(keep, "to", CGE_F16), CGE_OK);
    ct_node(g, "Neg", "t16", NULL, "n");
    /* If(cond): then Identity(t), else Neg(t) of the outer t */
    cge_graph *then_g = ct_graph("then"), *else_g = ct_graph("else");
    ct_node(then_g, "Identity", "t", NULL, "o");
    ct_output(then_g, "o");
    ct_node(else_g, "Neg", "t", NULL, "o");
    ct_output(else_g, "o");
    const char *if_in[2] = {"cond", "t"}, *if_out = "branch", *outer[1] = {"t"};
    cge_node *iff = ct_node_n(g, "If", "", if_in, 2, &if_out, 1);
    cge_attr on = {.name = "outer_names", .kind = CGE_ATTR_STRINGS, .strings = outer, .n = 1};
    assert_int_equal(cge_attrs_set(cge_node_attrs(iff), &on), CGE_OK);
    cge_attr tb = {.name = "then_branch", .kind = CGE_ATTR_GRAPH, .g = then_g};
    cge_attr eb = {.name = "else_branch", .kind = CGE_ATTR_GRAPH, .g = else_g};
    assert_int_equal(cge_attrs_set(cge_node_attrs(iff), &tb), CGE_OK);
    assert_int_equal(cge_attrs_set(cge_node_attrs(iff), &eb), CGE_OK);
    cge_graph_destroy(then_g);
    cge_graph_destroy(else_g);
    cge_node *c32 = ct_node(g, "Cast", "t", NULL, "y");
    assert_int_equal(cge_node_set_int(c32, "to", CGE_F32), CGE_OK);
    ct_output(g, "y");
    ct_output(g, "n");
    ct_output(g, "branch");

    float xv[12];
    for (int i = 0; i < 12; i++)
        xv[i] = value_at(i, 9) * 1.7f;
    uint8_t cond = 0;
    cge_tensor in[2] = {{.dtype = CGE_F32, .shape = xs, .data = xv, .bytes = sizeof xv},
                        {.dtype = CGE_BOOL, .shape = bs, .data = &cond, .bytes = 1}};
    cge_tensor o[3];
    cge_plan *p = NULL;
    cge_compile_options wide = ct_opts(CGE_OPT_LAYOUT);
    if (ct_compile_run(g, &wide, in, 2, o, 3, &p))
        fail_msg("%s", cge_last_error());
    output_dtype_is(p, 0, CGE_F32);
    output_dtype_is(p, 1, CGE_F16);
    output_dtype_is(p, 2, CGE_F16);
    /* reference: x rounded to half (the model's Cast), the product and tanh
     * in float32 */
    const float *y = o[0].data;
    const uint16_t *n = o[1].data, *br = o[2].data;
    double err = 0;
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < 4; j++) {
            double acc = 0;
            for (int k = 0; k < 4; k++)
                acc += (double)cge_f16_to_f32(cge_f32_to_f16(xv[r * 4 + k])) *
                       cge_f16_to_f32(cge_f32_to_f16(value_at(k * 4 + j, 3) * 0.5f));
            double t = tanh(acc);
            err = fmax(err, fabs(y[r * 4 + j] - t));
            /* the half readers see t rounded to half */
            uint16_t t16 = cge_f32_to_f16(y[r * 4 + j]);
            assert_int_equal(n[r * 4 + j], cge_f32_to_f16(-cge_f16_to_f32(t16)));
            assert_int_equal(br[r * 4 + j], n[r * 4 + j]);
        }
    assert_true(err < 1e-5);
    /* the rounding the model asks for stays: x -> half is a Cast of the plan */
    assert_true(ct_count_op(p, "Cast") >= 2);
    cge_plan_destroy(p);
    ct_free_outputs(o, 3);
    cge_graph_destroy(g);
}

/* A half constant read by a widened node and by one left as it is keeps
 * its half bytes for the latter, and the widened copy is made once for
 * two readers. */
static void test_constant_widened_once(void **state)
{
    (void)state;
    cge_graph *g = ct_graph("shared_const");
    cge_shape xs = CGE_SHAPE(2, 8);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F16, &xs), CGE_OK);
    half_const(g, "w", CGE_F16, (cge_shape)CGE_SHAPE(8), 6, 1.0f);
    ct_node(g, "Mul", "x", "w", "a");
    ct_node(g, "Add", "a", "w", "b");
    ct_output(g, "b");
    cge_tensor in = half_input(CGE_F16, xs, 2);
    cge_plan *p = NULL;
    compare_levels(g, CGE_F16, &in, 1, 1, 2e-3, &p);
    assert_int_equal(steps_touching(p, CGE_F16), 0);
    assert_int_equal(ct_count_op(p, "Cast"), 2);
    cge_plan_destroy(p);
    free(in.data);
    cge_graph_destroy(g);
}

/* Body `body` (destroyed here) as node n's "body", reading outer `outer`. */
static void attach_body(cge_node *n, cge_graph *body, const char *outer)
{
    const char *names[1] = {outer};
    cge_attr on = {.name = "outer_names", .kind = CGE_ATTR_STRINGS, .strings = names, .n = 1};
    assert_int_equal(cge_attrs_set(cge_node_attrs(n), &on), CGE_OK);
    assert_int_equal(cge_node_set_graph(n, "body", body), CGE_OK);
    cge_graph_destroy(body);
}

/* The plan's step running op `op` (the first), or NULL. */
static const cge_plan_step *step_of(const cge_plan *p, const char *op)
{
    for (int32_t k = 0; k < cge_plan_num_steps(p); k++)
        if (!strcmp(cge_node_op_type(cge_plan_steps(p)[k].node), op))
            return &cge_plan_steps(p)[k];
    return NULL;
}

static int32_t body_count_op(const cge_graph *b, const char *op)
{
    int32_t c = 0;
    for (int32_t i = 0; i < cge_graph_num_nodes(b); i++)
        c += !cge_node_is_removed(cge_graph_node(b, i)) &&
             !strcmp(cge_node_op_type(cge_graph_node(b, i)), op);
    return c;
}

/* The dtype body value `name` had when the body was built: constants' own. */
static cge_dtype body_const_dtype(const cge_graph *b, const char *name)
{
    const cge_tensor *t = cge_graph_value_constant(b, cge_graph_value_id(b, name));
    return t ? t->dtype : CGE_DTYPE_UNDEFINED;
}

/* Loop(3 iterations, x [4,8]): body x_in -> MatMul(outer W [8,8]) -> Add(body
 * constant bias) -> Tanh -> x_out (carried), Neg(mm) -> scan output s.
 * `model_cast` puts a Cast to half of the body's own in the body (mm ->
 * Cast(to half) -> Tanh). */
static cge_graph *half_loop(cge_dtype dt, bool model_cast)
{
    cge_graph *g = ct_graph("half_loop"), *body = ct_graph("body");
    cge_shape xs = CGE_SHAPE(4, 8), sc = CGE_SCALAR;
    assert_int_equal(cge_graph_add_input(g, "x", dt, &xs), CGE_OK);
    half_const(g, "W", dt, (cge_shape)CGE_SHAPE(8, 8), 5, 0.4f);
    int64_t trips = 3;
    ct_const_i64(g, "M", &trips, 1);
    uint8_t yes = 1;
    assert_int_equal(cge_graph_add_constant(g, "cond", CGE_BOOL, &sc, &yes, 1), CGE_OK);
    assert_int_equal(cge_graph_add_input(body, "i", CGE_I64, &sc), CGE_OK);
    assert_int_equal(cge_graph_add_input(body, "c", CGE_BOOL, &sc), CGE_OK);
    assert_int_equal(cge_graph_add_input(body, "x_in", dt, &xs), CGE_OK);
    half_const(body, "bias", dt, (cge_shape)CGE_SHAPE(8), 6, 0.1f);
    ct_node(body, "MatMul", "x_in", "W", "mm");
    ct_node(body, "Add", "mm", "bias", "pre");
    if (model_cast) {
        cge_node *c = ct_node(body, "Cast", "pre", NULL, "pre_h");
        assert_int_equal(cge_node_set_int(c, "to", dt), CGE_OK);
        ct_node(body, "Tanh", "pre_h", NULL, "x_out");
    } else {
        ct_node(body, "Tanh", "pre", NULL, "x_out");
    }
    ct_node(body, "Neg", "mm", NULL, "s");
    ct_node(body, "Identity", "c", NULL, "c_out");
    ct_output(body, "c_out");
    ct_output(body, "x_out");
    ct_output(body, "s");
    const char *ins[4] = {"M", "cond", "x", "W"}, *outs[2] = {"y", "scan"};
    attach_body(ct_node_n(g, "Loop", "", ins, 4, outs, 2), body, "W");
    ct_output(g, "y");
    ct_output(g, "scan");
    return g;
}

static void check_loop(cge_dtype dt, double tol)
{
    cge_graph *g = half_loop(dt, false);
    cge_tensor in = half_input(dt, (cge_shape)CGE_SHAPE(4, 8), 7);
    cge_plan *p = NULL;
    compare_levels(g, dt, &in, 1, 2, tol, &p);
    const cge_plan_step *s = step_of(p, "Loop");
    assert_non_null(s);
    /* the outer weight reaches the body in float32, widened once */
    assert_int_equal(cge_plan_values(p)[s->inputs[3]].dtype, CGE_F32);
    assert_int_equal(cge_plan_values(p)[s->inputs[2]].dtype, dt);   /* the carried x: half */
    const cge_graph *b = cge_attrs_get_graph(cge_node_attrs_const(s->node), "body");
    /* a Cast after x_in, one before each half output (x_out, s) */
    assert_int_equal(body_count_op(b, "Cast"), 3);
    const cge_node *add = NULL;
    for (int32_t i = 0; i < cge_graph_num_nodes(b); i++)
        if (!strcmp(cge_node_op_type(cge_graph_node(b, i)), "Add"))
            add = cge_graph_node(b, i);
    assert_non_null(add);
    assert_int_equal(body_const_dtype(b, cge_node_input(add, 1)), CGE_F32);
    /* the interface as the model has it */
    assert_int_equal(cge_graph_num_outputs(b), 3);
    assert_string_equal(cge_graph_output(b, 1), "x_out");
    cge_plan_destroy(p);
    free(in.data);
    cge_graph_destroy(g);
}

/* A Loop body computes in float32 between Casts at its half inputs and
 * outputs, its outer half weight given to it in float32; results agree
 * with the half computation within half's rounding per iteration. */
static void test_loop_body_float32(void **state)
{
    (void)state;
    check_loop(CGE_F16, 3e-3);
    check_loop(CGE_BF16, 2e-2);
}

/* A body with a Cast to half of its own keeps its types as they are. */
static void test_body_with_model_cast_kept(void **state)
{
    (void)state;
    cge_graph *g = half_loop(CGE_F16, true);
    cge_tensor in = half_input(CGE_F16, (cge_shape)CGE_SHAPE(4, 8), 7);
    cge_plan *p = NULL;
    compare_levels(g, CGE_F16, &in, 1, 2, 1e-6, &p);   /* the same computation */
    const cge_plan_step *s = step_of(p, "Loop");
    assert_non_null(s);
    assert_int_equal(cge_plan_values(p)[s->inputs[3]].dtype, CGE_F16);
    const cge_graph *b = cge_attrs_get_graph(cge_node_attrs_const(s->node), "body");
    assert_int_equal(body_count_op(b, "Cast"), 1);   /* the model's */
    cge_plan_destroy(p);
    free(in.data);
    cge_graph_destroy(g);
}

/* Scan (opset 9 form): a running sum state += slice * outer half scale;
 * the body's state and scan output computed in float32 between Casts. */
static void test_scan_body_float32(void **state)
{
    (void)state;
    cge_dtype dt = CGE_F16;
    cge_graph *g = ct_graph("half_scan"), *body = ct_graph("body");
    cge_shape st_s = CGE_SHAPE(6), xs = CGE_SHAPE(5, 6);
    assert_int_equal(cge_graph_add_input(g, "init", dt, &st_s), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "seq", dt, &xs), CGE_OK);
    half_const(g, "scale", dt, st_s, 8, 0.7f);
    assert_int_equal(cge_graph_add_input(body, "acc", dt, &st_s), CGE_OK);
    assert_int_equal(cge_graph_add_input(body, "row", dt, &st_s), CGE_OK);
    ct_node(body, "Mul", "row", "scale", "scaled");
    ct_node(body, "Add", "acc", "scaled", "acc_out");
    ct_node(body, "Sigmoid", "acc_out", NULL, "each");
    ct_output(body, "acc_out");
    ct_output(body, "each");
    const char *ins[3] = {"init", "seq", "scale"}, *outs[2] = {"final", "all"};
    cge_node *scan = ct_node_n(g, "Scan", "", ins, 3, outs, 2);
    assert_int_equal(cge_node_set_int(scan, "num_scan_inputs", 1), CGE_OK);
    attach_body(scan, body, "scale");
    ct_output(g, "final");
    ct_output(g, "all");
    cge_tensor in[2] = {half_input(dt, st_s, 1), half_input(dt, xs, 2)};
    cge_plan *p = NULL;
    compare_levels(g, dt, in, 2, 2, 3e-3, &p);
    const cge_plan_step *s = step_of(p, "Scan");
    assert_non_null(s);
    assert_int_equal(cge_plan_values(p)[s->inputs[2]].dtype, CGE_F32);
    const cge_graph *b = cge_attrs_get_graph(cge_node_attrs_const(s->node), "body");
    assert_int_equal(body_count_op(b, "Cast"), 4);   /* two inputs, two outputs */
    cge_plan_destroy(p);
    free(in[0].data);
    free(in[1].data);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cnn_runs_float32_kernels),
        cmocka_unit_test(test_mixed_readers_and_model_casts),
        cmocka_unit_test(test_constant_widened_once),
        cmocka_unit_test(test_loop_body_float32),
        cmocka_unit_test(test_body_with_model_cast_kept),
        cmocka_unit_test(test_scan_body_float32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
