/* Meta on nodes and graphs: schema checks (arity, attributes), dtype sets,
 * then each operator's infer, in topological order over a graph. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/meta.h"

static void dtype_set_str(cge_dtype_set set, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int t = 1; t < CGE_DTYPE_MAX && n < size; t++)
        if (set & CGE_DT(t))
            n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "",
                                  cge_dtype_name((cge_dtype)t));
}

static int32_t min_inputs(const cge_op_def *def)
{
    int32_t m = 0;
    for (int32_t i = 0; i < def->num_inputs; i++)
        if (!(def->inputs[i].flags & CGE_ARG_OPTIONAL))
            m = i + 1;
    return m;
}

static bool last_variadic(const cge_arg_def *args, int32_t n)
{
    return n > 0 && (args[n - 1].flags & CGE_ARG_VARIADIC);
}

/* The schema argument that node input `i` binds to. */
static const cge_arg_def *arg_for(const cge_arg_def *args, int32_t n, int32_t i)
{
    if (i < n)
        return &args[i];
    return last_variadic(args, n) ? &args[n - 1] : NULL;
}

cge_status cge__op_check_arity(const cge_op_def *def, const char *node_name,
                              const bool *input_present, int32_t num_inputs,
                              int32_t num_outputs)
{
    int32_t lo = min_inputs(def);
    bool var_in = last_variadic(def->inputs, def->num_inputs);
    if (num_inputs < lo || (!var_in && num_inputs > def->num_inputs))
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                         "%s '%s': %d inputs given; the schema takes %d%s%d", def->name,
                         node_name, num_inputs, lo, var_in ? " or more, at least " : " to ",
                         var_in ? lo : def->num_inputs);
    for (int32_t i = 0; i < num_inputs; i++) {
        const cge_arg_def *a = arg_for(def->inputs, def->num_inputs, i);
        if (!input_present[i] && !(a->flags & CGE_ARG_OPTIONAL))
            return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                             "%s '%s': required input %d ('%s') is missing", def->name,
                             node_name, i, a->name);
    }
    int32_t lo_out = 0;
    for (int32_t i = 0; i < def->num_outputs; i++)
        if (!(def->outputs[i].flags & CGE_ARG_OPTIONAL))
            lo_out = i + 1;
    bool var_out = last_variadic(def->outputs, def->num_outputs);
    if (num_outputs < lo_out || (!var_out && num_outputs > def->num_outputs))
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                         "%s '%s': %d outputs given; the schema has %d%s%d", def->name,
                         node_name, num_outputs, lo_out, var_out ? " or more, at least " : " to ",
                         var_out ? lo_out : def->num_outputs);
    return CGE_OK;
}

cge_status cge__op_check_attrs(const cge_op_def *def, const char *node_name,
                              const cge_attrs *attrs)
{
    int32_t n = attrs ? cge_attrs_count(attrs) : 0;
    for (int32_t i = 0; i < n; i++) {
        const cge_attr *a = cge_attrs_at(attrs, i);
        const cge_attr_def *ad = NULL;
        for (int32_t j = 0; j < def->num_attrs && !ad; j++)
            if (!strcmp(def->attrs[j].name, a->name))
                ad = &def->attrs[j];
        if (!ad)
            return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                             "%s '%s': unknown attribute '%s'", def->name, node_name, a->name);
        if (ad->kind != a->kind)
            return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                             "%s '%s': attribute '%s' is %s; the schema wants %s", def->name,
                             node_name, a->name, cge_attr_kind_name(a->kind),
                             cge_attr_kind_name(ad->kind));
    }
    for (int32_t j = 0; j < def->num_attrs; j++)
        if (def->attrs[j].required && !(attrs && cge_attrs_find(attrs, def->attrs[j].name)))
            return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                             "%s '%s': required attribute '%s' is missing", def->name,
                             node_name, def->attrs[j].name);
    return CGE_OK;
}

static cge_status too_large(const cge_op_def *def, const char *node_name, const char *role,
                            int32_t i, const cge_tensor_desc *d)
{
    char sh[CGE_SHAPE_STR_MAX], sz[64];
    return cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                     "%s '%s': %s %d ('%s') is %s %s: %s, too large (a tensor holds at most "
                     "2^56 bytes)",
                     def->name, node_name, role, (int)i, d->name ? d->name : "",
                     cge_dtype_name(d->dtype), cge_shape_str(&d->shape, sh, sizeof sh),
                     cge_tensor_size_str(d->dtype, &d->shape, sz, sizeof sz));
}

cge_status cge__op_infer_node(const cge_op_def *def, const char *node_name,
                             const cge_attrs *attrs, const cge_tensor_desc *inputs,
                             const void *const *input_values, int32_t num_inputs,
                             cge_tensor_desc *outputs, int32_t num_outputs)
{
    return cge__op_infer_node_symbolic(def, node_name, attrs, inputs, input_values, NULL,
                                      num_inputs, outputs, num_outputs);
}

cge_status cge__op_infer_node_symbolic(const cge_op_def *def, const char *node_name,
                                      const cge_attrs *attrs, const cge_tensor_desc *inputs,
                                      const void *const *input_values,
                                      const cge_symbolic_value *const *input_symbolic,
                                      int32_t num_inputs, cge_tensor_desc *outputs,
                                      int32_t num_outputs)
{
    for (int32_t i = 0; i < num_inputs; i++) {
        const cge_arg_def *a = arg_for(def->inputs, def->num_inputs, i);
        cge_dtype t = inputs[i].dtype;
        if (t == CGE_DTYPE_UNDEFINED || !a)
            continue;
        if (inputs[i].type != CGE_TYPE_TENSOR && !(a->flags & CGE_ARG_NON_TENSOR))
            return cge_error(CGE_LAYER_META, CGE_ERR_DTYPE,
                             "%s '%s': input %d ('%s') is a %s of %s; %s takes a tensor there",
                             def->name, node_name, i, a->name, cge_value_type_name(inputs[i].type),
                             cge_dtype_name(t), def->name);
        if (!cge_dtype_valid(t))
            return cge_error(CGE_LAYER_META, CGE_ERR_DTYPE, "%s '%s': input %d ('%s') has no valid dtype",
                             def->name, node_name, i, a->name);
        if (a->dtypes && !(a->dtypes & CGE_DT(t))) {
            char allowed[512];
            dtype_set_str(a->dtypes, allowed, sizeof allowed);
            return cge_error(CGE_LAYER_META, CGE_ERR_DTYPE,
                             "%s '%s': input %d ('%s') is %s; %s accepts %s", def->name,
                             node_name, i, a->name, cge_dtype_name(t), def->name, allowed);
        }
    }
    /* A size no buffer can have is refused before any meta multiplies it
     * (graph inputs reach here first as some node's input). */
    for (int32_t i = 0; i < num_inputs; i++)
        if (cge_dtype_valid(inputs[i].dtype) && inputs[i].type == CGE_TYPE_TENSOR &&
            cge_tensor_too_large(inputs[i].dtype, &inputs[i].shape))
            return too_large(def, node_name, "input", i, &inputs[i]);
    for (int32_t i = 0; i < num_outputs; i++) {
        outputs[i].dtype = CGE_DTYPE_UNDEFINED;
        memset(&outputs[i].shape, 0, sizeof outputs[i].shape);
        outputs[i].shape.rank = -1; /* detects outputs that infer forgot */
        outputs[i].format = CGE_FORMAT_PLAIN;
        outputs[i].type = CGE_TYPE_TENSOR;
    }
    const void *no_values[1] = {NULL};
    const void **vals = NULL;
    if (!input_values && num_inputs > 0) {
        vals = calloc((size_t)num_inputs, sizeof *vals);
        if (!vals)
            return cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "%s '%s': out of memory",
                             def->name, node_name);
    }
    cge_infer_ctx ctx = {
        .op_type = def->name,
        .node_name = node_name,
        .num_inputs = num_inputs,
        .inputs = inputs,
        .input_values = input_values ? input_values : (vals ? (const void *const *)vals : no_values),
        .attrs = attrs,
        .num_outputs = num_outputs,
        .outputs = outputs,
        .input_symbolic = input_symbolic,
    };
    cge_status st = def->infer(&ctx);
    free(vals);
    if (st) {
        if (cge_last_error_status() != st)
            cge_error(CGE_LAYER_META, st, "%s '%s': meta failed (%s) without a message",
                      def->name, node_name, cge_status_name(st));
        return st;
    }
    for (int32_t i = 0; i < num_outputs; i++)
        if (!cge_dtype_valid(outputs[i].dtype) ||
            outputs[i].shape.rank < (outputs[i].type == CGE_TYPE_TENSOR ? 0 : -1) ||
            outputs[i].shape.rank > CGE_MAX_RANK)
            return cge_error(CGE_LAYER_META, CGE_ERR_INTERNAL,
                             "%s '%s': meta left output %d without a dtype or shape", def->name,
                             node_name, i);
        else if (outputs[i].type == CGE_TYPE_TENSOR &&
                 cge_tensor_too_large(outputs[i].dtype, &outputs[i].shape))
            return too_large(def, node_name, "output", i, &outputs[i]);
    return CGE_OK;
}

cge_status cge_op_infer(const cge_op_def *def, const char *node_name, const cge_attrs *attrs,
                        const cge_tensor_desc *inputs, const void *const *input_values,
                        const cge_symbolic_value *const *input_symbolic, int32_t num_inputs,
                        cge_tensor_desc *outputs, int32_t num_outputs)
{
    if (!def || (num_inputs && !inputs) || (num_outputs && !outputs) || num_inputs < 0 ||
        num_outputs < 0)
        return cge_error(CGE_LAYER_META, CGE_ERR_INVALID_ARG,
                         "cge_op_infer: no definition, or inputs/outputs missing");
    return cge__op_infer_node_symbolic(def, node_name ? node_name : "", attrs, inputs,
                                      input_values, input_symbolic, num_inputs, outputs,
                                      num_outputs);
}

static const char *node_label(const cge_node *n) { return cge_node_name(n); }

cge_status cge_node_check_schema(const cge_graph *g, const cge_node *n)
{
    (void)g;
    if (!n)
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG, "check_schema: node is NULL");
    const cge_op_def *def = cge_op_find(cge_node_domain(n), cge_node_op_type(n), 0);
    if (!def) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", cge_last_error());
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_NOT_FOUND, "node '%s': %s", node_label(n),
                         msg + strlen("[schema] "));
    }
    int32_t ni = cge_node_num_inputs(n);
    bool small[16];
    bool *present = ni <= 16 ? small : malloc(sizeof(bool) * (size_t)ni);
    if (!present)
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_NO_MEMORY, "out of memory");
    for (int32_t i = 0; i < ni; i++)
        present[i] = cge_node_input(n, i)[0] != '\0';
    cge_status st = cge__op_check_arity(def, node_label(n), present, ni, cge_node_num_outputs(n));
    if (present != small)
        free(present);
    if (st)
        return st;
    return cge__op_check_attrs(def, node_label(n), cge_node_attrs_const(n));
}

cge_status cge_graph_verify(const cge_graph *g)
{
    if (!g)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "verify: graph is NULL");
    cge_status st = cge_graph_verify_structure(g);
    for (int32_t i = 0; !st && i < cge_graph_num_nodes(g); i++)
        st = cge_node_check_schema(g, cge_graph_node(g, i));
    return st;
}

cge_status cge_graph_infer(cge_graph *g)
{
    if (!g)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "infer: graph is NULL");
    int32_t nn = cge_graph_num_nodes(g);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(nn ? nn : 1));
    if (!order)
        return cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "infer: out of memory");
    cge_status st = cge_graph_topo_order(g, order);
    cge_tensor_desc *in = NULL, *out = NULL;
    const void **vals = NULL;
    int32_t cap_in = 0, cap_out = 0;
    for (int32_t k = 0; !st && k < nn; k++) {
        cge_node *n = cge_graph_node(g, order[k]);
        const cge_op_def *def = cge_op_find(cge_node_domain(n), cge_node_op_type(n), 0);
        if (!def) {
            st = cge_node_check_schema(g, n);
            break;
        }
        int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
        if (ni > cap_in) {
            cap_in = ni * 2;
            void *a = realloc(in, sizeof *in * (size_t)cap_in);
            void *b = a ? realloc(vals, sizeof *vals * (size_t)cap_in) : NULL;
            if (a)
                in = a;
            if (b)
                vals = b;
            if (!a || !b) {
                st = cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "infer: out of memory");
                break;
            }
        }
        if (no > cap_out) {
            cap_out = no * 2;
            void *a = realloc(out, sizeof *out * (size_t)cap_out);
            if (!a) {
                st = cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "infer: out of memory");
                break;
            }
            out = a;
        }
        for (int32_t i = 0; i < ni && !st; i++) {
            const char *name = cge_node_input(n, i);
            memset(&in[i], 0, sizeof in[i]);
            vals[i] = NULL;
            in[i].name = name;
            if (!name[0])
                continue;
            st = cge_graph_get_desc(g, name, &in[i]);
            const cge_tensor *c = cge_graph_constant(g, name);
            vals[i] = c ? c->data : NULL;
        }
        for (int32_t i = 0; i < no; i++) {
            memset(&out[i], 0, sizeof out[i]);
            out[i].name = cge_node_output(n, i);
        }
        if (!st)
            st = cge__op_infer_node(def, cge_node_name(n), cge_node_attrs_const(n), in, vals, ni,
                                   out, no);
        for (int32_t i = 0; i < no && !st; i++) {
            st = cge_graph_set_value_type(g, out[i].name, out[i].type);
            if (!st)
                st = cge_graph_set_desc(g, out[i].name, out[i].dtype, &out[i].shape);
        }
    }
    free(order);
    free(in);
    free(out);
    free(vals);
    return st;
}

cge_status cge_meta_error(const cge_infer_ctx *ctx, cge_status status, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cge_error(CGE_LAYER_META, status, "%s '%s': %s", ctx ? ctx->op_type : "?",
                     ctx && ctx->node_name ? ctx->node_name : "?", msg);
}

cge_status cge_kernel_error(const cge_kernel_ctx *ctx, cge_status status, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cge_error(CGE_LAYER_KERNEL, status, "%s '%s': %s", ctx ? ctx->op_type : "?",
                     ctx && ctx->node_name ? ctx->node_name : "?", msg);
}
