/* optimize/fuse_conv_activation: a float32 Conv or ConvTranspose followed by
 * a residual Add and/or an activation becomes one cge.fused FusedConv, and so
 * does a lone Conv with constant weights and a spatial kernel (a lone
 * ConvTranspose with constant weights). */
#include <math.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

/* The residual Add's addend has the output's shape; the activations are Relu,
 * LeakyRelu, Clip with constant bounds, Sigmoid, Tanh, exact Gelu,
 * HardSigmoid, HardSwish, and the gated pairs y * Sigmoid(y) (SiLU) and
 * y * HardSigmoid(y) (HardSwish as opset 13 exports it). Where oneDNN picks
 * its own layouts (blocked or channels-last) the add and the activation are
 * the primitive's post-ops, elsewhere they run on each output plane while it
 * is in cache. The sum and the post-ops other than relu/clip may round
 * differently from the unfused nodes on oneDNN (a few ulp); the fallback
 * epilogues are exact. A Conv with constant weights
 * and a spatial kernel becomes one even alone (w_const): its kernel keeps W
 * reordered into oneDNN's layout. */

/* Float32 with every dim known or a named symbol (a symbolic plan's batch:
 * the kernel gets concrete shapes when each signature's plan prepares it),
 * never an anonymous -1. */
static bool f32_sized(const cge_graph *g, int32_t id, cge_tensor_desc *d)
{
    return id >= 0 && !cge_graph_value_desc(g, id, d) && d->dtype == CGE_F32 &&
           cge_shape_same(&d->shape, &d->shape);
}

/* The activations only FusedConv takes: HardSigmoid and HardSwish (alpha,
 * beta as the unfused kernels read them), and exact Gelu; gelu_tanh is not
 * one of its activations. */
static bool match_conv_activation(const cge_graph *g, const cge_node *n, cc_activation *av,
                                  float *beta)
{
    const cge_attrs *at = cge_node_attrs_const(n);
    *beta = 0.5f;
    if (cc_is_op(n, "HardSigmoid") || cc_is_op(n, "HardSwish")) {
        *av = (cc_activation){.lo = -INFINITY, .hi = INFINITY};
        bool hs = cc_is_op(n, "HardSigmoid");
        av->name = hs ? "hardsigmoid" : "hardswish";
        av->alpha = hs ? cge_attrs_get_float(at, "alpha", 0.2f) : 1.0f / 6.0f;
        *beta = hs ? cge_attrs_get_float(at, "beta", 0.5f) : 0.5f;
        return true;
    }
    return cc_match_activation(g, n, true, av) && strcmp(av->name, "gelu_tanh") != 0;
}

/* The activation of a gated pair y * gate(y) (cc_match_gated). */
static bool match_gated(const cc_uses *u, const cge_graph *g, int32_t y, cge_node **gate,
                        cge_node **mul, cc_activation *av, float *beta)
{
    if (!cc_match_gated(u, g, y, gate, mul))
        return false;
    if (cc_is_op(*gate, "Sigmoid")) {
        *av = (cc_activation){.name = "silu", .alpha = 0.01f, .lo = -INFINITY, .hi = INFINITY};
        *beta = 0.5f;
    } else {
        match_conv_activation(g, *gate, av, beta);
        av->name = "hardswish";
    }
    return true;
}

static cge_status try_fuse(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *conv)
{
    int32_t ni = cge_node_num_inputs(conv);
    if (ni < 2 || ni > 3 || cge_node_num_outputs(conv) != 1)
        return CGE_OK;
    int32_t x = cge_node_input_id(conv, 0), w = cge_node_input_id(conv, 1);
    int32_t b = ni == 3 ? cge_node_input_id(conv, 2) : -1, y = cge_node_output_id(conv, 0);
    cge_tensor_desc xd, wd, bd, yd;
    if (!f32_sized(g, x, &xd) || !f32_sized(g, w, &wd) || !f32_sized(g, y, &yd) ||
        (b >= 0 && !f32_sized(g, b, &bd)))
        return CGE_OK;
    cge_node *nodes[4] = {conv, NULL, NULL, NULL};
    int32_t count = 1, cur = y, z = -1;
    cge_node *next = cc_only_consumer(u, g, cur);
    if (next && cc_is_op(next, "Add") && cge_node_num_inputs(next) == 2) {
        int32_t o = cc_other_input(next, cur);
        cge_tensor_desc od, sd;
        if (o >= 0 && o != cur && f32_sized(g, o, &od) && cge_shape_same(&od.shape, &yd.shape) &&
            f32_sized(g, cge_node_output_id(next, 0), &sd) &&
            cge_shape_same(&sd.shape, &yd.shape)) {
            z = o;
            nodes[count++] = next;
            cur = cge_node_output_id(next, 0);
            next = cc_only_consumer(u, g, cur);
        }
    }
    cc_activation av = {0};
    float beta = 0.5f;
    cge_node *gate = NULL, *mul = NULL;
    const char *act = NULL;
    cge_tensor_desc ad;
    if (match_gated(u, g, cur, &gate, &mul, &av, &beta)) {
        if (f32_sized(g, cge_node_output_id(mul, 0), &ad) &&
            cge_shape_same(&ad.shape, &yd.shape)) {
            act = av.name;
            nodes[count++] = gate;
            nodes[count++] = mul;
            cur = cge_node_output_id(mul, 0);
        }
    } else if (next && cge_node_num_outputs(next) == 1 &&
               match_conv_activation(g, next, &av, &beta)) {
        act = av.name;
        if (!f32_sized(g, cge_node_output_id(next, 0), &ad) ||
            !cge_shape_same(&ad.shape, &yd.shape))
            act = NULL;
        if (act) {
            nodes[count++] = next;
            cur = cge_node_output_id(next, 0);
        }
    }
    /* A lone Conv gains only where its kernel can keep W in oneDNN's layout,
     * reordered once: constant W, one group, a kernel larger than 1x1. */
    bool w_const = cge_graph_value_constant(g, w) != NULL;
    /* At level 3 every such Conv becomes one: layout_channels_last takes
     * FusedConvs only. */
    bool any_window = ctx->level >= CGE_OPT_LAYOUT && cge_fused_conv_channels_last_available();
    /* A ConvTranspose with constant W always: oneDNN's deconvolution then
     * keeps W in its own layout (channels-last at level 3). */
    bool transpose = cc_is_op(conv, "ConvTranspose");
    if (transpose && count == 1 && !w_const)
        return CGE_OK;
    if (!transpose && count == 1 &&
        (!w_const || (!any_window &&
                      (cge_attrs_get_int(cge_node_attrs_const(conv), "group", 1) != 1 ||
                       cge_shape_numel(&wd.shape) == wd.shape.dims[0] * wd.shape.dims[1]))))
        return CGE_OK;
    const char *ins[4] = {cge_graph_value_name(g, x), cge_graph_value_name(g, w),
                          b >= 0 ? cge_graph_value_name(g, b) : "",
                          z >= 0 ? cge_graph_value_name(g, z) : ""};
    const char *out = cge_graph_value_name(g, cur);
    char name[256];
    cc_fresh_name(ctx, g, cge_node_name(conv), name, sizeof name);
    cge_node *f = NULL;
    /* The fused node takes the Conv's attributes before the Conv goes. */
    cge_status st = CGE_OK;
    for (int32_t k = 1; k < count && !st; k++)
        st = cge_graph_remove_node(g, nodes[k]);
    char tmp[256];
    if (count == 1) /* the Conv's output name passes to the fused node */
        st = cge_node_set_output(conv, 0, cc_fresh_name(ctx, g, out, tmp, sizeof tmp));
    if (!st)
        st = cge_graph_add_node(g, "FusedConv", CGE_DOMAIN_FUSED, name, ins,
                                z >= 0 ? 4 : b >= 0 ? 3 : 2, &out, 1, &f);
    if (!st)
        st = cc_copy_attrs(f, conv);
    if (!st)
        st = cge_graph_remove_node(g, conv);
    if (!st && act)
        st = cc_set_activation(f, &av);
    if (!st && act && (!strcmp(act, "hardsigmoid") || !strcmp(act, "hardswish"))) {
        st = cge_node_set_float(f, "alpha", av.alpha);
        if (!st)
            st = cge_node_set_float(f, "beta", beta);
    }
    if (!st && w_const)
        st = cge_node_set_int(f, "w_const", 1);
    if (!st && transpose)
        st = cge_node_set_int(f, "transpose", 1);
    if (!st)
        st = cc_fused_node(ctx, u, f, count);
    return st;
}

cge_status cc_pass_fuse_conv_activation(cc_ctx *ctx, cge_graph *g)
{
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (cc_is_op(n, "Conv") || cc_is_op(n, "ConvTranspose"))
            st = try_fuse(ctx, &u, g, n);
    }
    cc_uses_free(&u);
    return st;
}
