/* optimize/fuse_layernorm: the decomposed form of LayerNormalization over the
 * last axis, as exporters write it, becomes one LayerNormalization node; and
 * optimize/fuse_skip_layernorm: Add -> LayerNormalization becomes one
 * cge.fused SkipLayerNorm. */
#include <stdlib.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

/* The pattern:
 *   m = ReduceMean(x, [-1]); d = x - m; v = ReduceMean(d^2 or d*d, [-1]);
 *   y = d / Sqrt(v + eps) [* gamma] [+ beta]
 * with constant eps, gamma and beta, and intermediates read only inside the
 * pattern. The fused kernel rounds differently: results differ by rounding. */

static bool available(void)
{
    const cge_op_def *d = cge_op_find("", "LayerNormalization", 0);
    bool ok = d && cge_op_find_kernel(d, "cpu", CGE_F32);
    cge_clear_error();
    return ok;
}

/* A ReduceMean over the last axis only, keeping dims. */
static bool mean_last(const cge_graph *g, const cge_node *n)
{
    if (!n || !cc_is_op(n, "ReduceMean"))
        return false;
    cge_tensor_desc in = cc_in_desc(g, n, 0);
    int32_t r = in.shape.rank;
    if (r < 1 || !cge_attrs_get_int(cge_node_attrs_const(n), "keepdims", 1))
        return false;
    const int64_t *ax = NULL;
    int64_t cnt = cge_attrs_get_ints(cge_node_attrs_const(n), "axes", &ax);
    int64_t a;
    if (cnt == 1) {
        a = ax[0];
    } else if (cnt < 0 && cge_node_num_inputs(n) == 2) {
        const cge_tensor *t = cc_input_const(g, n, 1);
        if (!t || t->dtype != CGE_I64 || cge_shape_numel(&t->shape) != 1)
            return false;
        a = ((const int64_t *)t->data)[0];
    } else {
        return false;
    }
    return a == -1 || a == r - 1;
}

static cge_node *consumer_op(const cc_uses *u, const cge_graph *g, int32_t id, const char *op)
{
    cge_node *n = cc_only_consumer(u, g, id);
    return n && cc_is_op(n, op) ? n : NULL;
}

/* gamma or beta: a float32 constant of shape [C] (what LayerNormalization
 * takes for the last axis). */
static bool per_channel(const cge_graph *g, int32_t id, int64_t c)
{
    const cge_tensor *t = cge_graph_value_constant(g, id);
    return t && t->dtype == CGE_F32 && t->shape.rank == 1 && t->shape.dims[0] == c;
}

static cge_status try_fuse(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *sub)
{
    if (cge_node_num_inputs(sub) != 2)
        return CGE_OK;
    int32_t x = cge_node_input_id(sub, 0), mv = cge_node_input_id(sub, 1);
    cge_node *mean = cge_graph_value_producer(g, mv);
    cge_tensor_desc xd;
    if (!mean_last(g, mean) || cge_node_input_id(mean, 0) != x || cc_only_consumer(u, g, mv) != sub ||
        cge_graph_value_desc(g, x, &xd) || xd.dtype != CGE_F32 || xd.shape.rank < 1 ||
        !cge_dim_is_known(xd.shape.dims[xd.shape.rank - 1]))
        return CGE_OK;   /* other dims may be symbolic: only C is needed */
    int64_t c = xd.shape.dims[xd.shape.rank - 1];
    int32_t d = cge_node_output_id(sub, 0);
    cc_use uses[4];
    int32_t nu = cc_uses_list(u, d, uses, 4);
    if (cge_graph_value_is_output(g, d) || nu < 2 || nu > 3)
        return CGE_OK;
    cge_node *sq = NULL, *div = NULL;
    for (int32_t k = 0; k < nu; k++) {
        cge_node *n = uses[k].node;
        if (cc_is_op(n, "Div") && uses[k].slot == 0)
            div = n;
        else if ((cc_is_op(n, "Pow") && uses[k].slot == 0 &&
                  cc_scalar_near(g, cge_node_input_id(n, 1), 2.0, 0.0)) ||
                 (cc_is_op(n, "Mul") && cge_node_input_id(n, 0) == d && cge_node_input_id(n, 1) == d))
            sq = n;
        else
            return CGE_OK;
    }
    if (!sq || !div || nu != (cc_is_op(sq, "Mul") ? 3 : 2))
        return CGE_OK;
    cge_node *var = consumer_op(u, g, cge_node_output_id(sq, 0), "ReduceMean");
    if (!mean_last(g, var))
        return CGE_OK;
    cge_node *add = consumer_op(u, g, cge_node_output_id(var, 0), "Add");
    if (!add)
        return CGE_OK;
    double eps;
    int32_t epsv = cc_other_input(add, cge_node_output_id(var, 0));
    if (!cc_const_scalar(cge_graph_value_constant(g, epsv), &eps))
        return CGE_OK;
    cge_node *sqrt = consumer_op(u, g, cge_node_output_id(add, 0), "Sqrt");
    if (!sqrt || cge_node_input_id(div, 1) != cge_node_output_id(sqrt, 0) ||
        cc_only_consumer(u, g, cge_node_output_id(sqrt, 0)) != div)
        return CGE_OK;
    cge_node *last = div, *mul = NULL, *badd = NULL;
    int32_t gamma = -1, beta = -1;
    cge_node *n = cc_only_consumer(u, g, cge_node_output_id(div, 0));
    if (n && cc_is_op(n, "Mul") && per_channel(g, cc_other_input(n, cge_node_output_id(div, 0)), c)) {
        mul = last = n;
        gamma = cc_other_input(n, cge_node_output_id(div, 0));
        n = cc_only_consumer(u, g, cge_node_output_id(mul, 0));
    }
    if (n && cc_is_op(n, "Add") && per_channel(g, cc_other_input(n, cge_node_output_id(last, 0)), c)) {
        badd = n;
        beta = cc_other_input(n, cge_node_output_id(last, 0));
        last = n;
    }
    cge_tensor_desc yd = cc_out_desc(g, last, 0);
    if (yd.dtype != CGE_F32 || !cge_shape_equal(&yd.shape, &xd.shape))
        return CGE_OK;
    char gname[256], name[256];
    const char *gamma_name;
    cge_status st = CGE_OK;
    if (gamma < 0) {
        float *ones = malloc(sizeof(float) * (size_t)(c ? c : 1));
        if (!ones)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "fuse_layernorm: out of memory");
        for (int64_t i = 0; i < c; i++)
            ones[i] = 1.0f;
        cge_shape s1 = CGE_SHAPE(c);
        st = cc_add_const(ctx, g, "ln_scale", CGE_F32, &s1, ones, gname, sizeof gname);
        free(ones);
        gamma_name = gname;
    } else {
        gamma_name = cge_graph_value_name(g, gamma);
    }
    const char *ins[3] = {cge_graph_value_name(g, x), gamma_name,
                          beta >= 0 ? cge_graph_value_name(g, beta) : ""};
    const char *y = cge_graph_value_name(g, cge_node_output_id(last, 0));
    cge_node *all[9] = {mean, sub, sq, var, add, sqrt, div, mul, badd};
    int32_t count = 0;
    for (int i = 0; i < 9 && !st; i++)
        if (all[i]) {
            st = cge_graph_remove_node(g, all[i]);
            count++;
        }
    cge_node *ln = NULL;
    cc_fresh_name(ctx, g, "LayerNormalization", name, sizeof name);
    if (!st)
        st = cge_graph_add_node(g, "LayerNormalization", "", name, ins, beta >= 0 ? 3 : 2, &y, 1, &ln);
    if (!st)
        st = cge_node_set_int(ln, "axis", -1);
    if (!st)
        st = cge_node_set_float(ln, "epsilon", (float)eps);
    if (!st)
        st = cc_fused_node(ctx, u, ln, count);
    return st;
}

typedef cge_status (*try_fn)(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *n);

/* Both passes: `fn` on every node of type `op` there was when they began. */
static cge_status each_node(cc_ctx *ctx, cge_graph *g, const char *op, try_fn fn)
{
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (cc_is_op(n, op))
            st = fn(ctx, &u, g, n);
    }
    cc_uses_free(&u);
    return st;
}

cge_status cc_pass_fuse_layernorm(cc_ctx *ctx, cge_graph *g)
{
    return available() ? each_node(ctx, g, "Sub", try_fuse) : CGE_OK;
}

/* ---- fuse_skip_layernorm ----------------------------------------------------------- */

/* A transformer's residual: LayerNormalization(a + b) over the last axis,
 * float32, a and b of the Add's own shape (a broadcast Add stays), constant
 * Scale and B of [D], no Mean/InvStdDev read. The Add's result stays an
 * output of the fused node (S) when anything else reads it (pre-norm's next
 * residual, a graph output). The kernel rounds the sum to float32 and runs
 * LayerNormalization's row: the same bits as the pair. It runs after
 * fuse_matmul_epilogue: a residual that a FusedMatMul took in its epilogue
 * (static shapes) costs no pass of its own already, and the Adds left (the
 * symbolic-length ones) come here. */

static bool skip_available(void)
{
    const cge_op_def *d = cge_op_find(CGE_DOMAIN_FUSED, "SkipLayerNorm", 1);
    bool ok = d && cge_op_find_kernel(d, "cpu", CGE_F32);
    cge_clear_error();
    return ok;
}

static cge_status try_skip(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *ln)
{
    int32_t ni = cge_node_num_inputs(ln), x = cge_node_input_id(ln, 0);
    if (ni < 2 || ni > 3 || x < 0)
        return CGE_OK;
    for (int32_t k = 1; k < cge_node_num_outputs(ln); k++)
        if (cge_node_output_id(ln, k) >= 0 && cc_value_used(u, g, cge_node_output_id(ln, k)))
            return CGE_OK;
    cge_node *add = cge_graph_value_producer(g, x);
    cge_tensor_desc xd;
    if (!add || !cc_is_op(add, "Add") || cge_node_num_inputs(add) != 2 ||
        cge_graph_value_desc(g, x, &xd) || xd.dtype != CGE_F32 || xd.shape.rank < 1 ||
        !cge_dim_is_known(xd.shape.dims[xd.shape.rank - 1]))
        return CGE_OK;
    const cge_attrs *at = cge_node_attrs_const(ln);
    int64_t axis = cge_attrs_get_int(at, "axis", -1);
    if ((axis != -1 && axis != xd.shape.rank - 1) || cge_attrs_get_int(at, "stash_type", 1) != 1)
        return CGE_OK;
    int64_t c = xd.shape.dims[xd.shape.rank - 1];
    int32_t sc = cge_node_input_id(ln, 1), bi = ni > 2 ? cge_node_input_id(ln, 2) : -1;
    if (!per_channel(g, sc, c) || (bi >= 0 && !per_channel(g, bi, c)))
        return CGE_OK;
    int32_t a = cge_node_input_id(add, 0), b = cge_node_input_id(add, 1);
    for (int32_t k = 0; k < 2; k++) {
        cge_tensor_desc d;
        if (cge_graph_value_desc(g, k ? b : a, &d) || d.dtype != CGE_F32 ||
            !cge_shape_equal(&d.shape, &xd.shape))
            return CGE_OK;   /* a broadcast Add keeps its own kernel */
    }
    bool keep_sum = cge_graph_value_is_output(g, x) || cc_uses_count(u, x) > 1;
    char name[256];
    const char *ins[4] = {cge_graph_value_name(g, a), cge_graph_value_name(g, b),
                          cge_graph_value_name(g, sc), bi >= 0 ? cge_graph_value_name(g, bi) : ""};
    const char *outs[2] = {cge_graph_value_name(g, cge_node_output_id(ln, 0)),
                           cge_graph_value_name(g, x)};
    float eps = cge_attrs_get_float(at, "epsilon", 1e-5f);
    cge_status st = cge_graph_remove_node(g, ln);
    if (!st)
        st = cge_graph_remove_node(g, add);
    cge_node *f = NULL;
    cc_fresh_name(ctx, g, "SkipLayerNorm", name, sizeof name);
    if (!st)
        st = cge_graph_add_node(g, "SkipLayerNorm", CGE_DOMAIN_FUSED, name, ins, bi >= 0 ? 4 : 3,
                                outs, keep_sum ? 2 : 1, &f);
    if (!st)
        st = cge_node_set_float(f, "epsilon", eps);
    if (!st)
        st = cc_fused_node(ctx, u, f, 2);
    return st;
}

cge_status cc_pass_fuse_skip_layernorm(cc_ctx *ctx, cge_graph *g)
{
    return skip_available() ? each_node(ctx, g, "LayerNormalization", try_skip) : CGE_OK;
}
