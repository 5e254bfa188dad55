/* optimize/fuse_gelu: 0.5 * x * (1 + erf(x / sqrt 2)), as exporters spell it
 * (x/1.4142 or x*0.7071; the 0.5 applied first, last or to the sum), becomes
 * one Gelu node. */
#include <math.h>

#include "compiler/compiler_internal.h"

/* The intermediates must have no other readers. Gelu's kernel rounds once
 * instead of five times: results differ by rounding only. */

#define TOL 1e-4

static bool gelu_available(void)
{
    const cge_op_def *d = cge_op_find("", "Gelu", 0);
    bool ok = d && cge_op_find_kernel(d, "cpu", CGE_F32);
    cge_clear_error();
    return ok;
}

/* The value x / sqrt2 is computed from, or -1. */
static int32_t scaled_source(const cge_graph *g, const cge_node *d)
{
    if (!d || cge_node_num_inputs(d) != 2)
        return -1;
    int32_t a = cge_node_input_id(d, 0), b = cge_node_input_id(d, 1);
    if (cc_is_op(d, "Div") && cc_scalar_near(g, b, M_SQRT2, TOL))
        return a;
    if (cc_is_op(d, "Mul")) {
        if (cc_scalar_near(g, b, M_SQRT1_2, TOL))
            return a;
        if (cc_scalar_near(g, a, M_SQRT1_2, TOL))
            return b;
    }
    return -1;
}

static bool is_half_of(const cge_graph *g, const cge_node *m, int32_t x)
{
    return m && cc_is_op(m, "Mul") && cc_other_input(m, x) >= 0 &&
           cc_scalar_near(g, cc_other_input(m, x), 0.5, 1e-7);
}

static cge_status try_fuse(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *e)
{
    cge_node *d = cge_graph_value_producer(g, cge_node_input_id(e, 0));
    int32_t x = scaled_source(g, d);
    cge_tensor_desc xd;
    if (x < 0 || cc_only_consumer(u, g, cge_node_output_id(d, 0)) != e ||
        cge_graph_value_desc(g, x, &xd) || xd.dtype != CGE_F32)
        return CGE_OK;
    int32_t ev = cge_node_output_id(e, 0);
    cge_node *a = cc_only_consumer(u, g, ev);
    if (!a || !cc_is_op(a, "Add") || !cc_scalar_near(g, cc_other_input(a, ev), 1.0, 1e-7))
        return CGE_OK;
    int32_t av = cge_node_output_id(a, 0);
    cge_node *m1 = cc_only_consumer(u, g, av);
    if (!m1 || !cc_is_op(m1, "Mul"))
        return CGE_OK;
    int32_t o = cc_other_input(m1, av), m1v = cge_node_output_id(m1, 0);
    cge_node *extra = NULL, *last = NULL;
    if (o == x) {                                  /* (x * a) * 0.5 */
        cge_node *m2 = cc_only_consumer(u, g, m1v);
        if (is_half_of(g, m2, m1v))
            last = m2;
    } else if (cc_scalar_near(g, o, 0.5, 1e-7)) {  /* x * (a * 0.5) */
        cge_node *m2 = cc_only_consumer(u, g, m1v);
        if (m2 && cc_is_op(m2, "Mul") && cc_other_input(m2, m1v) == x)
            last = m2;
    } else {                                       /* (x * 0.5) * a */
        cge_node *h = cge_graph_value_producer(g, o);
        if (is_half_of(g, h, x) && cc_only_consumer(u, g, o) == m1) {
            extra = h;
            last = m1;
        }
    }
    if (!last)
        return CGE_OK;
    cge_tensor_desc yd = cc_out_desc(g, last, 0);
    if (!cge_shape_equal(&yd.shape, &xd.shape) || yd.dtype != CGE_F32)
        return CGE_OK;
    cge_node *all[5] = {d, e, a, m1, last == m1 ? extra : last};
    const char *y = cge_graph_value_name(g, cge_node_output_id(last, 0));
    const char *xin = cge_graph_value_name(g, x);
    char name[256];
    cc_fresh_name(ctx, g, "Gelu", name, sizeof name);
    cge_status st = CGE_OK;
    int32_t count = 0;
    for (int i = 0; i < 5 && !st; i++)
        if (all[i]) {
            st = cge_graph_remove_node(g, all[i]);
            count++;
        }
    cge_node *gn = NULL;
    if (!st)
        st = cge_graph_add_node(g, "Gelu", "", name, &xin, 1, &y, 1, &gn);
    if (!st)
        st = cc_fused_node(ctx, u, gn, count);
    return st;
}

cge_status cc_pass_fuse_gelu(cc_ctx *ctx, cge_graph *g)
{
    if (!gelu_available())
        return CGE_OK;
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (cc_is_op(n, "Erf") && cge_node_num_inputs(n) == 1)
            st = try_fuse(ctx, &u, g, n);
    }
    cc_uses_free(&u);
    return st;
}
