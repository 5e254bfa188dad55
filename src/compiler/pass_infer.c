/* prepare/infer (and again after optimize): shapes and dtypes of every value
 * from the input signature, with the values of small shape computations
 * carried along. Exported models compute shapes in the graph
 * (Shape -> Gather -> Concat -> Reshape, ConstantOfShape(Size(x) - 1), ...):
 * with static inputs those values are known here, and meta gets them, so the
 * shapes downstream become static. Nothing is rewritten: constant folding
 * removes such nodes later, at levels that fold. Dimensions nobody can know
 * stay dynamic. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"
#include "ops/meta.h"

#define MAX_IO 16
/* Values carried along are shape-sized, not tensors. */
#define PROPAGATE_MAX_BYTES 4096

typedef struct propagation {
    void **known;          /* value id -> host data computed here (owned) */
    int32_t num_values;
} propagation;

static const void *value_of(const cge_graph *g, const propagation *p, int32_t id)
{
    if (id < 0)
        return NULL;
    const cge_tensor *c = cge_graph_value_constant(g, id);
    if (c)
        return c->data;
    return id < p->num_values ? p->known[id] : NULL;
}

/* Shape and Size need only the input's (static) shape, not its data. */
static bool from_shape(const cge_node *n, const cge_tensor_desc *in, const cge_tensor_desc *out,
                       void **host)
{
    if (in[0].dtype == CGE_DTYPE_UNDEFINED || !cge_shape_is_static(&in[0].shape))
        return false;
    if (cc_is_op(n, "Size")) {
        int64_t *v = malloc(sizeof *v);
        if (!v)
            return false;
        *v = cge_shape_numel(&in[0].shape);
        host[0] = v;
        return true;
    }
    if (cc_is_op(n, "Shape") && out[0].shape.rank == 1 && out[0].shape.dims[0] >= 0) {
        int64_t r = in[0].shape.rank;
        int64_t s = cge_attrs_get_int(cge_node_attrs_const(n), "start", 0);
        s = s < 0 ? s + r : s;
        s = s < 0 ? 0 : (s > r ? r : s);
        int64_t cnt = out[0].shape.dims[0];
        int64_t *v = malloc(sizeof *v * (size_t)(cnt ? cnt : 1));
        if (!v)
            return false;
        memcpy(v, in[0].shape.dims + s, sizeof *v * (size_t)cnt);
        host[0] = v;
        return true;
    }
    return false;
}

/* Evaluate `n` when every input it has is known and its outputs are small. */
static void propagate(cc_ctx *ctx, cge_graph *g, propagation *p, cge_node *n,
                      const cge_op_def *def, const cge_tensor_desc *in, const void *const *vals,
                      const cge_tensor_desc *out)
{
    int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
    if (no == 0 || cc_is_nondeterministic(n))
        return;
    size_t total = 0;
    cge_dtype dt = CGE_DTYPE_UNDEFINED;
    for (int32_t i = 0; i < no; i++) {
        if (!cge_dtype_valid(out[i].dtype) || !cge_shape_is_static(&out[i].shape))
            return;
        total += cge_tensor_nbytes(out[i].dtype, &out[i].shape);
    }
    if (total > PROPAGATE_MAX_BYTES)
        return;
    void *host[MAX_IO] = {0};
    bool done = from_shape(n, in, out, host);
    if (!done) {
        cge_tensor ins[MAX_IO];
        for (int32_t i = 0; i < ni; i++) {
            ins[i] = (cge_tensor){.dtype = CGE_DTYPE_UNDEFINED};
            if (in[i].dtype == CGE_DTYPE_UNDEFINED)
                continue;
            if (!vals[i] || !cge_shape_is_static(&in[i].shape) ||
                cge_tensor_nbytes(in[i].dtype, &in[i].shape) > PROPAGATE_MAX_BYTES)
                return;
            ins[i] = (cge_tensor){.dtype = in[i].dtype, .shape = in[i].shape,
                                  .data = (void *)vals[i]};
            if (dt == CGE_DTYPE_UNDEFINED)
                dt = in[i].dtype;
        }
        const cge_kernel_def *k = cge_op_find_kernel(def, "cpu", dt);
        if (!k || cc_evaluate_node(ctx, n, k, ins, out, host) != CGE_OK) {
            /* Not known now; the run computes it (and reports any problem). */
            cge_clear_error();
            return;
        }
    }
    for (int32_t i = 0; i < no; i++) {
        int32_t id = cge_node_output_id(n, i);
        if (id >= 0 && id < p->num_values && !p->known[id]) {
            p->known[id] = host[i];
            host[i] = NULL;
        }
        free(host[i]);
    }
    (void)g;
}

cge_status cc_pass_infer(cc_ctx *ctx, cge_graph *g)
{
    int32_t nn = cge_graph_num_nodes(g);
    propagation p = {.num_values = cge_graph_num_values(g)};
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(nn ? nn : 1));
    p.known = calloc((size_t)(p.num_values ? p.num_values : 1), sizeof(void *));
    cge_status st = order && p.known ? cge_graph_topo_order(g, order)
                                     : cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "infer: out of memory");
    for (int32_t k = 0; !st && k < nn; k++) {
        cge_node *n = cge_graph_node(g, order[k]);
        if (cge_node_is_removed(n))
            continue;
        int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
        const cge_op_def *def = cc_find_op(ctx, n);
        if (!def) {
            st = cge_node_check_schema(g, n);
            if (!st)
                st = cge_last_error_status();
            break;
        }
        cge_tensor_desc small_in[MAX_IO], small_out[MAX_IO];
        const void *small_vals[MAX_IO];
        bool big = ni > MAX_IO || no > MAX_IO;
        cge_tensor_desc *in = big ? calloc((size_t)ni + 1, sizeof *in) : small_in;
        cge_tensor_desc *out = big ? calloc((size_t)no + 1, sizeof *out) : small_out;
        const void **vals = big ? calloc((size_t)ni + 1, sizeof *vals) : small_vals;
        if (!in || !out || !vals) {
            st = cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "infer: out of memory");
        } else {
            for (int32_t i = 0; i < ni; i++) {
                in[i] = cc_in_desc(g, n, i);
                vals[i] = value_of(g, &p, cge_node_input_id(n, i));
            }
            for (int32_t i = 0; i < no; i++)
                out[i] = (cge_tensor_desc){.name = cge_node_output(n, i)};
            st = cge_op_infer_node(def, cge_node_name(n), cge_node_attrs_const(n), in, vals, ni,
                                   out, no);
            for (int32_t i = 0; !st && i < no; i++)
                st = cge_graph_set_desc(g, out[i].name, out[i].dtype, &out[i].shape);
            if (!st && !big)
                propagate(ctx, g, &p, n, def, in, vals, out);
        }
        if (big) {
            free(in);
            free(out);
            free(vals);
        }
    }
    for (int32_t i = 0; p.known && i < p.num_values; i++)
        free(p.known[i]);
    free(p.known);
    free(order);
    return st;
}

cge_status cge_graph_infer_values(cge_graph *g)
{
    if (!g)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "infer: graph is NULL");
    cc_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "infer: out of memory");
    cge_status st = cc_pass_infer(ctx, g);
    /* Only the compile-time device may exist here (made when a value was
     * evaluated). */
    cge_stream_destroy(ctx->stream);
    if (ctx->own_dev)
        cge_device_destroy(ctx->dev);
    free(ctx);
    return st;
}
