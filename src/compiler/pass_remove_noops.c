/* optimize/remove_noops: nodes that only pass data through are removed, chains
 * of views and of Transposes collapse, and a Transpose that moves only size-1
 * dims becomes a Reshape. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* Nodes that only pass data through: Identity, Dropout in inference, Cast to
 * the same dtype, views (Reshape, Flatten, Squeeze, Unsqueeze) and Expand
 * whose output shape is the input's, Transpose by the identity permutation,
 * Pad by zeros. A Transpose that moves only size-1 dims becomes a Reshape (a
 * view, no copy). In chains, a view of a view becomes one Reshape of the
 * origin (or nothing, if the shapes match), and two Transposes become one (or
 * nothing, if they cancel). Everything here is exact. */

static bool is_view(const cge_node *n)
{
    return cc_is_op(n, "Reshape") || cc_is_op(n, "Flatten") || cc_is_op(n, "Squeeze") ||
           cc_is_op(n, "Unsqueeze");
}

static bool same_desc(const cge_tensor_desc *a, const cge_tensor_desc *b)
{
    return a->dtype == b->dtype && a->dtype != CGE_DTYPE_UNDEFINED &&
           cge_shape_is_static(&a->shape) && cge_shape_equal(&a->shape, &b->shape);
}

/* Whether every output but 0 is unused. */
static bool only_output0(const cc_uses *u, const cge_graph *g, const cge_node *n)
{
    for (int32_t o = 1; o < cge_node_num_outputs(n); o++)
        if (cc_value_used(u, g, cge_node_output_id(n, o)))
            return false;
    return true;
}

static cge_status bypass0(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *n)
{
    bool done;
    return cc_bypass(ctx, u, g, n, 0, cge_node_input_id(n, 0), &done);
}

static bool dropout_is_identity(const cc_ctx *ctx, const cge_graph *g, const cge_node *n)
{
    if (ctx->opts.training)
        return false;
    /* ratio 0 keeps every element even in training mode (torchvision's swin
     * exports attention dropout so: training_mode true, ratio 0) */
    if (cge_node_num_inputs(n) >= 2 && cge_node_input_id(n, 1) >= 0) {
        const cge_tensor *t = cc_input_const(g, n, 1);
        if (t && cc_const_all_equal(t, 0.0, false))
            return true;
    }
    if (cge_node_num_inputs(n) >= 3 && cge_node_input_id(n, 2) >= 0) {
        const cge_tensor *t = cc_input_const(g, n, 2);
        return t && cc_const_all_equal(t, 0.0, false);
    }
    return true;
}

/* n (one output) becomes a Reshape of value `src` to the constant shape
 * `cname`, producing the same value. */
static cge_status replace_by_reshape(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *n,
                                     const char *src, const char *cname)
{
    char nname[256];
    const char *outname = cge_graph_value_name(g, cge_node_output_id(n, 0));
    const char *ins[2] = {src, cname};
    cc_fresh_name(ctx, g, cge_node_name(n), nname, sizeof nname);
    cge_status st = cge_graph_remove_node(g, n);
    cge_node *r = NULL;
    if (!st)
        st = cge_graph_add_node(g, "Reshape", "", nname, ins, 2, &outname, 1, &r);
    if (!st) {
        ctx->removed++;
        ctx->added++;
        st = cc_uses_add_node(u, r);
    }
    return st;
}

/* A view of a view: read the origin directly. */
static cge_status collapse_views(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *n)
{
    cge_tensor_desc out = cc_out_desc(g, n, 0);
    if (!cge_shape_is_static(&out.shape) || out.dtype == CGE_DTYPE_UNDEFINED)
        return CGE_OK;
    int32_t origin = cge_node_input_id(n, 0);
    cge_node *p = cge_graph_value_producer(g, origin);
    int guard = 0;
    while (p && is_view(p) && guard++ < 1024) {
        origin = cge_node_input_id(p, 0);
        p = cge_graph_value_producer(g, origin);
    }
    cge_tensor_desc od;
    cge_graph_value_desc(g, origin, &od);
    if (same_desc(&od, &out)) {
        bool done;
        return cc_bypass(ctx, u, g, n, 0, origin, &done);
    }
    if (origin == cge_node_input_id(n, 0))
        return CGE_OK;
    char cname[256];
    cge_shape s1 = CGE_SHAPE(out.shape.rank);
    cge_status st = cc_add_const(ctx, g, "shape", CGE_I64, &s1, out.shape.dims, cname, sizeof cname);
    if (st)
        return st;
    if (cc_is_op(n, "Reshape") && !cge_attrs_find(cge_node_attrs_const(n), "allowzero")) {
        st = cge_node_set_input(n, 0, od.name);
        if (!st)
            st = cge_node_set_input(n, 1, cname);
        if (!st)
            st = cc_uses_add_node(u, n);
        return st;
    }
    /* Another view op, or allowzero: a fresh Reshape producing the same value. */
    return replace_by_reshape(ctx, u, g, n, od.name, cname);
}

static bool read_perm(const cge_node *n, int32_t rank, int64_t *perm)
{
    const int64_t *p;
    int64_t cnt = cge_attrs_get_ints(cge_node_attrs_const(n), "perm", &p);
    if (cnt < 0) {
        for (int32_t i = 0; i < rank; i++)
            perm[i] = rank - 1 - i;
        return true;
    }
    if (cnt != rank)
        return false;
    for (int32_t i = 0; i < rank; i++)
        perm[i] = p[i];
    return true;
}

/* A permutation that keeps the dims larger than 1 in their order moves only
 * size-1 dims: the bytes stay where they are, so it is a view. */
static bool moves_only_unit_dims(const cge_shape *s, const int64_t *perm, int32_t rank)
{
    if (!cge_shape_is_static(s))
        return false;
    int64_t last = -1;
    for (int32_t i = 0; i < rank; i++) {
        if (perm[i] < 0 || perm[i] >= rank)
            return false;
        if (s->dims[perm[i]] == 1)
            continue;
        if (perm[i] < last)
            return false;
        last = perm[i];
    }
    return true;
}

/* Transpose -> Reshape to its output shape (same output value). */
static cge_status transpose_to_reshape(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *n)
{
    cge_tensor_desc out = cc_out_desc(g, n, 0);
    if (!cge_shape_is_static(&out.shape))
        return CGE_OK;
    char cname[256];
    cge_shape s1 = CGE_SHAPE(out.shape.rank);
    cge_status st = cc_add_const(ctx, g, "shape", CGE_I64, &s1, out.shape.dims, cname, sizeof cname);
    if (st)
        return st;
    return replace_by_reshape(ctx, u, g, n, cge_graph_value_name(g, cge_node_input_id(n, 0)),
                              cname);
}

static cge_status transpose(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *n)
{
    cge_tensor_desc in = cc_in_desc(g, n, 0);
    int32_t rank = in.shape.rank;
    if (in.dtype == CGE_DTYPE_UNDEFINED || rank < 1)
        return CGE_OK;
    int64_t p2[CGE_MAX_RANK];
    if (!read_perm(n, rank, p2))
        return CGE_OK;
    bool ident = true;
    for (int32_t i = 0; i < rank; i++)
        ident &= p2[i] == i;
    if (ident)
        return bypass0(ctx, u, g, n);
    if (moves_only_unit_dims(&in.shape, p2, rank))
        return transpose_to_reshape(ctx, u, g, n);
    cge_node *p = cge_graph_value_producer(g, cge_node_input_id(n, 0));
    if (!p || !cc_is_op(p, "Transpose"))
        return CGE_OK;
    int64_t p1[CGE_MAX_RANK], q[CGE_MAX_RANK];
    if (!read_perm(p, rank, p1))
        return CGE_OK;
    /* out[i] = mid[p2[i]] = x[p1[p2[i]]]. */
    ident = true;
    for (int32_t i = 0; i < rank; i++) {
        if (p2[i] < 0 || p2[i] >= rank)
            return CGE_OK;
        q[i] = p1[p2[i]];
        ident &= q[i] == i;
    }
    int32_t x = cge_node_input_id(p, 0);
    if (ident) {
        bool done;
        return cc_bypass(ctx, u, g, n, 0, x, &done);
    }
    cge_status st = cge_node_set_input(n, 0, cge_graph_value_name(g, x));
    if (!st)
        st = cc_uses_add(u, n, 0);
    if (!st)
        st = cge_node_set_ints(n, "perm", q, rank);
    if (!st)
        ctx->removed++; /* one Transpose fewer once the first dies */
    return st;
}

static cge_status visit(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *n)
{
    if (cge_node_num_inputs(n) < 1 || cge_node_num_outputs(n) < 1 || cge_node_input_id(n, 0) < 0)
        return CGE_OK;
    cge_tensor_desc in = cc_in_desc(g, n, 0), out = cc_out_desc(g, n, 0);
    if (cc_is_op(n, "Identity"))
        return bypass0(ctx, u, g, n);
    if (cc_is_op(n, "Dropout")) {
        if (dropout_is_identity(ctx, g, n) && only_output0(u, g, n) && in.dtype == out.dtype)
            return bypass0(ctx, u, g, n);
        return CGE_OK;
    }
    if (cc_is_op(n, "Cast")) {
        if (in.dtype != CGE_DTYPE_UNDEFINED &&
            cge_attrs_get_int(cge_node_attrs_const(n), "to", -1) == (int64_t)in.dtype)
            return bypass0(ctx, u, g, n);
        return CGE_OK;
    }
    if (is_view(n)) {
        if (same_desc(&in, &out))
            return bypass0(ctx, u, g, n);
        return collapse_views(ctx, u, g, n);
    }
    if (cc_is_op(n, "Expand")) {
        if (same_desc(&in, &out))
            return bypass0(ctx, u, g, n);
        return CGE_OK;
    }
    if (cc_is_op(n, "Transpose"))
        return transpose(ctx, u, g, n);
    if (cc_is_op(n, "Pad")) {
        /* pads all 0 (the input form, or the old attribute): a copy */
        const cge_tensor *pads = cc_input_const(g, n, 1);
        const int64_t *pa = NULL;
        int64_t na = cge_attrs_get_ints(cge_node_attrs_const(n), "pads", &pa);
        bool zero = pads ? cc_const_all_equal(pads, 0.0, false)
                         : cge_node_num_inputs(n) < 2 && na >= 0;
        for (int64_t k = 0; !pads && zero && k < na; k++)
            zero = pa[k] == 0;
        if (zero && same_desc(&in, &out))
            return bypass0(ctx, u, g, n);
        return CGE_OK;
    }
    return CGE_OK;
}

cge_status cc_pass_remove_noops(cc_ctx *ctx, cge_graph *g)
{
    int32_t nn = cge_graph_num_nodes(g);
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(nn ? nn : 1));
    if (!st && !order)
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "remove_noops: out of memory");
    if (!st)
        st = cge_graph_topo_order(g, order);
    for (int32_t k = 0; !st && k < nn; k++) {
        cge_node *n = cge_graph_node(g, order[k]);
        if (!cge_node_is_removed(n))
            st = visit(ctx, &u, g, n);
    }
    free(order);
    cc_uses_free(&u);
    return st;
}
