/* optimize/simplify_algebra: identities that hold bit for bit (x*1, 1*x, x/1,
 * x^1, -(-x), x + (-0.0), x - (+0.0), and x + 0 for integers) reduced to x. */
#include <string.h>

#include "compiler/compiler_internal.h"

/* x*1, 1*x, x/1, x^1 and -(-x) are x for every x; x + (-0.0) and x - (+0.0)
 * are x for every float x, while x + 0.0 is not (-0.0 + 0.0 is +0.0), so only
 * integers drop a +0. The result must have x's dtype and shape (no broadcast
 * widening). */

static bool keeps_desc(const cge_graph *g, const cge_node *n, int32_t x)
{
    cge_tensor_desc a = cc_in_desc(g, n, x), o = cc_out_desc(g, n, 0);
    return a.dtype == o.dtype && a.dtype != CGE_DTYPE_UNDEFINED && cge_shape_is_static(&o.shape) &&
           cge_shape_equal(&a.shape, &o.shape);
}

/* Which input (0 or 1) is the identity operand's partner, or -1. */
static int32_t identity_operand(const cge_graph *g, const cge_node *n)
{
    if (cge_node_num_inputs(n) != 2 || cge_node_num_outputs(n) != 1)
        return -1;
    const cge_tensor *c0 = cc_input_const(g, n, 0), *c1 = cc_input_const(g, n, 1);
    cge_tensor_desc o = cc_out_desc(g, n, 0);
    bool isf = cge_dtype_is_float(o.dtype);
    if (cc_is_op(n, "Mul")) {
        if (c1 && cc_const_all_equal(c1, 1.0, false) && keeps_desc(g, n, 0))
            return 0;
        if (c0 && cc_const_all_equal(c0, 1.0, false) && keeps_desc(g, n, 1))
            return 1;
    } else if (cc_is_op(n, "Add")) {
        double zero = isf ? -0.0 : 0.0;
        if (c1 && cc_const_all_equal(c1, zero, true) && keeps_desc(g, n, 0))
            return 0;
        if (c0 && cc_const_all_equal(c0, zero, true) && keeps_desc(g, n, 1))
            return 1;
    } else if (cc_is_op(n, "Sub")) {
        if (c1 && cc_const_all_equal(c1, 0.0, true) && keeps_desc(g, n, 0))
            return 0;
    } else if (cc_is_op(n, "Div") || cc_is_op(n, "Pow")) {
        if (c1 && cc_const_all_equal(c1, 1.0, false) && keeps_desc(g, n, 0))
            return 0;
    }
    return -1;
}

cge_status cc_pass_simplify_algebra(cc_ctx *ctx, cge_graph *g)
{
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (cge_node_is_removed(n))
            continue;
        bool done;
        int32_t x = identity_operand(g, n);
        if (x >= 0) {
            st = cc_bypass(ctx, &u, g, n, 0, cge_node_input_id(n, x), &done);
            continue;
        }
        if (cc_is_op(n, "Neg") && cge_node_num_inputs(n) == 1) {
            cge_node *p = cge_graph_value_producer(g, cge_node_input_id(n, 0));
            if (p && cc_is_op(p, "Neg") && keeps_desc(g, p, 0) && keeps_desc(g, n, 0))
                st = cc_bypass(ctx, &u, g, n, 0, cge_node_input_id(p, 0), &done);
        }
    }
    cc_uses_free(&u);
    return st;
}
