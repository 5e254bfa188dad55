/* prepare/normalize: canonical attribute forms, negative axes made positive
 * where the rank is known and absent attributes with a non-zero schema default
 * written out. */
#include <string.h>

#include "compiler/compiler_internal.h"

/* Canonical forms let later passes (CSE above all) see one spelling of one
 * meaning. Zero defaults are left alone: for some operators "absent" means
 * something else than 0. */

/* Operators whose "axis" counts dims of input 0 ([-r, r)); Flatten's may
 * also equal r; OneHot's counts dims of its output, one more than input 0's. */
static const char *const axis_ops[] = {
    "Softmax", "LogSoftmax", "Concat", "Gather", "Split", "Flatten", "LayerNormalization",
    "GatherElements", "ArgMax", "ArgMin", "Hardmax", "CumSum", "QuantizeLinear",
    "DequantizeLinear", "OneHot", NULL};
/* Operators whose "axes" attribute counts dims of input 0. */
static const char *const axes_ops[] = {
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "Squeeze", NULL};

static bool listed(const char *const *list, const char *op)
{
    for (; *list; list++)
        if (!strcmp(*list, op))
            return true;
    return false;
}

static cge_status fix_axes(cc_ctx *ctx, cge_graph *g, cge_node *n)
{
    const char *op = cge_node_op_type(n);
    if (cge_node_domain(n)[0] || cge_node_num_inputs(n) < 1)
        return CGE_OK;
    cge_tensor_desc in = cc_in_desc(g, n, 0);
    if (in.dtype == CGE_DTYPE_UNDEFINED)
        return CGE_OK;
    int32_t rank = in.shape.rank;
    if (!strcmp(op, "OneHot"))
        rank++;
    cge_attrs *a = cge_node_attrs(n);
    if (listed(axis_ops, op)) {
        const cge_attr *ax = cge_attrs_find(a, "axis");
        if (ax && ax->kind == CGE_ATTR_INT && ax->i < 0) {
            /* Flatten's axis lies in [-r, r] and counts from r when negative
             * (not from r + 1 as Unsqueeze's does); the others lie in [-r, r). */
            if (!strcmp(op, "Flatten")) {
                if (ax->i >= -(int64_t)rank)
                    return cge_node_set_int(n, "axis", ax->i + rank);
            } else {
                int32_t pos;
                if (cge_axis_normalize(ax->i, rank, false, &pos))
                    return cge_node_set_int(n, "axis", pos);
            }
        }
    }
    if (listed(axes_ops, op)) {
        const int64_t *v;
        int64_t cnt = cge_attrs_get_ints(a, "axes", &v);
        bool neg = false;
        for (int64_t k = 0; k < cnt; k++)
            neg |= v[k] < 0;
        if (!neg || cnt > CGE_MAX_RANK)
            return CGE_OK;
        int64_t fixed[CGE_MAX_RANK];
        for (int64_t k = 0; k < cnt; k++) {
            int32_t pos;
            if (!cge_axis_normalize(v[k], rank, false, &pos))
                return CGE_OK; /* meta reports it */
            fixed[k] = pos;
        }
        return cge_node_set_ints(n, "axes", fixed, cnt);
    }
    return CGE_OK;
}

static cge_status fill_defaults(cc_ctx *ctx, cge_node *n)
{
    const cge_op_def *def = cc_find_op(ctx, n);
    if (!def) {
        cge_clear_error();
        return CGE_OK;
    }
    cge_attrs *a = cge_node_attrs(n);
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < def->num_attrs; i++) {
        const cge_attr_def *ad = &def->attrs[i];
        if (ad->required || cge_attrs_find(a, ad->name))
            continue;
        if (ad->kind == CGE_ATTR_INT && ad->default_i != 0)
            st = cge_node_set_int(n, ad->name, ad->default_i);
        else if (ad->kind == CGE_ATTR_FLOAT && ad->default_f != 0.0f)
            st = cge_node_set_float(n, ad->name, ad->default_f);
        else if (ad->kind == CGE_ATTR_STRING && ad->default_s)
            st = cge_node_set_string(n, ad->name, ad->default_s);
    }
    return st;
}

cge_status cc_pass_normalize(cc_ctx *ctx, cge_graph *g)
{
    /* Every rewrite here spells an attribute another way with the same
     * meaning, so the values the inference computed still hold: folding
     * takes them only while known_rev is the graph's revision, and without
     * this a symbolic graph kept every shape computation the inference had
     * already done (Gather(Shape(x), -1) of a known last dim, the bounds of
     * the Slices that cut q, k and v out of a packed projection). */
    bool known = ctx->known && ctx->known_rev == cge_graph_revision(g);
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < cge_graph_num_nodes(g); i++) {
        cge_node *n = cge_graph_node(g, i);
        st = fill_defaults(ctx, n);
        if (!st)
            st = fix_axes(ctx, g, n);
    }
    if (!st && known)
        ctx->known_rev = cge_graph_revision(g);
    return st;
}
