/* optimize/fold_constants: a node whose inputs are all constants (and Shape of
 * a static shape) is evaluated now with its CPU kernel, and its outputs become
 * constants of the same names. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* Only outputs within the size cap are folded: folding must not bloat the
 * weights. Results are the kernels' own, so the rewrite is exact. */

#define MAX_IO 16

/* `n` replaced by constants of its outputs' names: data[i] holds output i's
 * bytes at its descriptor (`outs`). */
static cge_status replace_by_constants(cc_ctx *ctx, cge_graph *g, cge_node *n,
                                       const cge_tensor_desc *outs, const void *const *data)
{
    int32_t no = cge_node_num_outputs(n);
    cge_status st = cge_graph_remove_node(g, n);
    for (int32_t i = 0; !st && i < no; i++)
        st = cge_graph_add_constant(g, outs[i].name, outs[i].dtype, &outs[i].shape, data[i],
                                    cge_tensor_nbytes(outs[i].dtype, &outs[i].shape));
    if (!st)
        ctx->removed++;
    return st;
}

/* Shape(x) with x static: [start, end) of x's dims as int64. */
static bool fold_shape(cc_ctx *ctx, cge_graph *g, cge_node *n, cge_status *st)
{
    if (cge_node_num_inputs(n) != 1 || cge_node_num_outputs(n) != 1)
        return false;
    cge_tensor_desc in = cc_in_desc(g, n, 0);
    if (in.dtype == CGE_DTYPE_UNDEFINED || !cge_shape_is_static(&in.shape))
        return false;
    int64_t r = in.shape.rank;
    int64_t s = cge_attrs_get_int(cge_node_attrs_const(n), "start", 0);
    int64_t e = cge_attrs_get_int(cge_node_attrs_const(n), "end", r);
    if (s < 0)
        s += r;
    if (e < 0)
        e += r;
    s = s < 0 ? 0 : (s > r ? r : s);
    e = e < 0 ? 0 : (e > r ? r : e);
    int64_t cnt = e > s ? e - s : 0;
    cge_tensor_desc out = {.name = cge_node_output(n, 0), .dtype = CGE_I64,
                           .shape = CGE_SHAPE(cnt)};
    const void *data[1] = {in.shape.dims + s};
    *st = replace_by_constants(ctx, g, n, &out, data);
    return true;
}

/* Every output of `n` computed by the inference this pass follows: they
 * become constants as they are (the same kernels made them), no evaluation. */
static bool fold_known(cc_ctx *ctx, cge_graph *g, cge_node *n, cge_status *st)
{
    int32_t no = cge_node_num_outputs(n);
    cge_tensor_desc outs[MAX_IO];
    size_t total = 0;
    for (int32_t i = 0; i < no; i++) {
        int32_t id = cge_node_output_id(n, i);
        if (id < 0 || id >= ctx->num_known || !ctx->known[id])
            return false;
        outs[i] = cc_out_desc(g, n, i);
        if (!cge_dtype_valid(outs[i].dtype) || !cge_shape_is_static(&outs[i].shape))
            return false;
        total += cge_tensor_nbytes(outs[i].dtype, &outs[i].shape);
    }
    if (total > ctx->opts.fold_limit_bytes)
        return false;
    const void *data[MAX_IO];
    for (int32_t i = 0; i < no; i++)
        data[i] = ctx->known[cge_node_output_id(n, i)];
    *st = replace_by_constants(ctx, g, n, outs, data);
    return true;
}

static cge_status fold_node(cc_ctx *ctx, cge_graph *g, cge_node *n, bool use_known,
                            const char *keep_op)
{
    int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
    if (ni > MAX_IO || no > MAX_IO || no == 0 || cc_is_nondeterministic(n) ||
        (keep_op && cc_is_op(n, keep_op)))
        return CGE_OK;
    cge_status kst = CGE_OK;
    if (use_known && fold_known(ctx, g, n, &kst))
        return kst;
    if (cc_is_op(n, "Shape")) {
        cge_status st = CGE_OK;
        if (fold_shape(ctx, g, n, &st))
            return st;
    }
    cge_dtype dt = CGE_DTYPE_UNDEFINED;
    for (int32_t i = 0; i < ni; i++) {
        int32_t id = cge_node_input_id(n, i);
        if (id < 0)
            continue;
        const cge_tensor *c = cge_graph_value_constant(g, id);
        if (!c)
            return CGE_OK;
        if (dt == CGE_DTYPE_UNDEFINED)
            dt = c->dtype;
    }
    size_t total = 0;
    for (int32_t i = 0; i < no; i++) {
        cge_tensor_desc d = cc_out_desc(g, n, i);
        if (!cge_dtype_valid(d.dtype) || !cge_shape_is_static(&d.shape))
            return CGE_OK;
        total += cge_tensor_nbytes(d.dtype, &d.shape);
        if (dt == CGE_DTYPE_UNDEFINED)
            dt = d.dtype;
    }
    if (total > ctx->opts.fold_limit_bytes)
        return CGE_OK;
    const cge_op_def *def = cc_find_op(ctx, n);
    const cge_kernel_def *k = def ? cge_op_find_kernel(def, "cpu", dt) : NULL;
    if (!k) {
        cge_clear_error();
        return CGE_OK;
    }
    void *host[MAX_IO] = {0};
    cge_tensor ins[MAX_IO];
    cge_tensor_desc out_desc[MAX_IO];
    for (int32_t i = 0; i < ni; i++) {
        const cge_tensor *c = cc_input_const(g, n, i);
        ins[i] = c ? *c : (cge_tensor){.dtype = CGE_DTYPE_UNDEFINED};
    }
    for (int32_t i = 0; i < no; i++)
        out_desc[i] = cc_out_desc(g, n, i);
    cge_status st = cc_evaluate_node(ctx, n, k, ins, out_desc, host);
    if (st) {
        /* Not foldable now; the run reports the same problem with context. */
        cge_clear_error();
        for (int32_t i = 0; i < no; i++)
            free(host[i]);
        return CGE_OK;
    }
    cge_tensor_desc outs[MAX_IO];
    for (int32_t i = 0; i < no; i++)
        outs[i] = cc_out_desc(g, n, i);
    st = replace_by_constants(ctx, g, n, outs, (const void *const *)host);
    for (int32_t i = 0; i < no; i++)
        free(host[i]);
    return st;
}

cge_status cc_pass_fold_constants(cc_ctx *ctx, cge_graph *g)
{
    return cc_fold_constants_keeping(ctx, g, NULL);
}

cge_status cc_fold_constants_keeping(cc_ctx *ctx, cge_graph *g, const char *keep_op)
{
    int32_t nn = cge_graph_num_nodes(g);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(nn ? nn : 1));
    if (!order)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "fold: out of memory");
    cge_status st = cge_graph_topo_order(g, order);
    /* The inference's values hold while the graph is as it saw it; folding
     * replaces nodes by exactly those values, so they hold for the pass. */
    bool use_known = ctx->known && ctx->known_rev == cge_graph_revision(g);
    for (int32_t k = 0; !st && k < nn; k++) {
        cge_node *n = cge_graph_node(g, order[k]);
        if (!cge_node_is_removed(n))
            st = fold_node(ctx, g, n, use_known, keep_op);
    }
    free(order);
    cc_forget_known(ctx);
    return st;
}
