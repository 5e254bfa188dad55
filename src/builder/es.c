/* The functional builder: handles name values of a graph built as the calls
 * come; each op call checks the schema and runs meta at once, so the first
 * error names the call's node. Output renames are applied at finish. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/es_internal.h"
#include "cge/op.h"
#include "ops/meta.h"

#define ERR_MAX 1024

struct cge_builder {
    cge_graph *g;
    char **names;          /* value id -> name in g */
    char **final_names;    /* value id -> output name given by cge_es_output, or NULL */
    bool *is_input;        /* value id is a graph input */
    int32_t num_values, cap_values;
    int64_t counter;       /* for generated names */
    char *next_name;
    cge_status status;
    cge_layer layer;
    char message[ERR_MAX];
    int32_t *outputs;      /* value ids marked as outputs, in order */
    int32_t num_outputs, cap_outputs;
};

static cge_status remember(cge_builder *b, cge_status st)
{
    if (st && !b->status) {
        b->status = st;
        b->layer = cge_last_error_layer();
        snprintf(b->message, sizeof b->message, "%s", cge_last_error());
    }
    return st;
}

cge_t cge__es_fail(cge_builder *b, const char *msg)
{
    if (b)
        remember(b, cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "%s", msg));
    return CGE_INVALID;
}

cge_status cge__es_fail_status(cge_builder *b, const char *msg)
{
    cge_status st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "%s", msg);
    if (b)
        remember(b, st);
    return st;
}

cge_builder *cge_builder_create(const char *graph_name)
{
    cge_builder *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    if (cge_graph_create(graph_name ? graph_name : "graph", &b->g) != CGE_OK) {
        free(b);
        return NULL;
    }
    return b;
}

static void free_names(cge_builder *b)
{
    for (int32_t i = 0; i < b->num_values; i++) {
        free(b->names[i]);
        free(b->final_names[i]);
    }
    free(b->names);
    free(b->final_names);
    free(b->is_input);
    b->names = b->final_names = NULL;
    b->is_input = NULL;
    b->num_values = b->cap_values = 0;
}

void cge_builder_destroy(cge_builder *b)
{
    if (!b)
        return;
    cge_graph_destroy(b->g);
    free_names(b);
    free(b->next_name);
    free(b->outputs);
    free(b);
}

cge_status cge_builder_status(const cge_builder *b)
{
    return b ? b->status : CGE_ERR_INVALID_ARG;
}

const char *cge_builder_error_message(const cge_builder *b)
{
    return b ? b->message : "";
}

void cge_builder_set_next_name(cge_builder *b, const char *node_name)
{
    if (!b)
        return;
    free(b->next_name);
    b->next_name = node_name ? strdup(node_name) : NULL;
}

/* A new value id named `name` (copied). */
static cge_t add_value(cge_builder *b, const char *name, bool is_input)
{
    if (b->num_values == b->cap_values) {
        int32_t nc = b->cap_values ? b->cap_values * 2 : 64;
        char **n1 = realloc(b->names, sizeof(char *) * (size_t)nc);
        if (n1)
            b->names = n1;
        char **n2 = n1 ? realloc(b->final_names, sizeof(char *) * (size_t)nc) : NULL;
        if (n2)
            b->final_names = n2;
        bool *n3 = n2 ? realloc(b->is_input, sizeof(bool) * (size_t)nc) : NULL;
        if (n3)
            b->is_input = n3;
        if (!n3) {
            remember(b, cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "builder: out of memory"));
            return CGE_INVALID;
        }
        b->cap_values = nc;
    }
    char *copy = strdup(name);
    if (!copy) {
        remember(b, cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "builder: out of memory"));
        return CGE_INVALID;
    }
    b->names[b->num_values] = copy;
    b->final_names[b->num_values] = NULL;
    b->is_input[b->num_values] = is_input;
    return (cge_t){b->num_values++};
}

static bool usable(cge_builder *b) { return b && !b->status; }

static bool valid_handle(const cge_builder *b, cge_t t)
{
    return t.id >= 0 && t.id < b->num_values;
}

cge_status cge_es_desc(const cge_builder *b, cge_t t, cge_tensor_desc *out)
{
    if (!b || !out || !valid_handle(b, t))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "cge_es_desc: invalid handle");
    return cge_graph_get_desc(b->g, b->names[t.id], out);
}

const char *cge_es_name(const cge_builder *b, cge_t t)
{
    if (!b || !valid_handle(b, t))
        return NULL;
    return b->final_names[t.id] ? b->final_names[t.id] : b->names[t.id];
}

cge_t cge_es_input(cge_builder *b, const char *name, cge_dtype dtype, cge_shape shape)
{
    if (!usable(b))
        return CGE_INVALID;
    if (!name || !name[0])
        return cge__es_fail(b, "cge_es_input: the input needs a name");
    if (remember(b, cge_graph_add_input(b->g, name, dtype, &shape)))
        return CGE_INVALID;
    return add_value(b, name, true);
}

cge_t cge_es_constant(cge_builder *b, const char *name, cge_dtype dtype, cge_shape shape,
                      const void *data)
{
    if (!usable(b))
        return CGE_INVALID;
    char gen[64];
    if (!name) {
        snprintf(gen, sizeof gen, "const_%lld", (long long)b->counter++);
        name = gen;
    }
    size_t bytes = cge_tensor_nbytes(dtype, &shape);
    if (!cge_dtype_valid(dtype) || !cge_shape_is_static(&shape) || (bytes && !data))
        return cge__es_fail(b, "cge_es_constant: needs a valid dtype, a static shape and data");
    if (remember(b, cge_graph_add_constant(b->g, name, dtype, &shape, data, bytes)))
        return CGE_INVALID;
    return add_value(b, name, false);
}

cge_t cge_es_scalar_f32(cge_builder *b, float v)
{
    return cge_es_constant(b, NULL, CGE_F32, CGE_SCALAR, &v);
}

cge_t cge_es_scalar_i64(cge_builder *b, int64_t v)
{
    return cge_es_constant(b, NULL, CGE_I64, CGE_SCALAR, &v);
}

cge_t cge_es_vector_i64(cge_builder *b, const int64_t *v, int64_t n)
{
    return cge_es_constant(b, NULL, CGE_I64, CGE_SHAPE(n), v);
}

cge_status cge_es_output(cge_builder *b, cge_t t, const char *name)
{
    if (!b)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "cge_es_output: builder is NULL");
    if (b->status)
        return b->status;
    if (!valid_handle(b, t))
        return cge__es_fail_status(b, "cge_es_output: invalid handle");
    for (int32_t i = 0; i < b->num_outputs; i++)
        if (b->outputs[i] == t.id)
            return cge__es_fail_status(b, "cge_es_output: value is already an output");
    if (name && strcmp(name, b->names[t.id]) != 0) {
        cge_tensor_desc d;
        /* The name must be free: neither a value of the graph nor another output's. */
        bool taken = cge_graph_get_desc(b->g, name, &d) == CGE_OK;
        for (int32_t i = 0; i < b->num_values && !taken; i++)
            taken = b->final_names[i] && !strcmp(b->final_names[i], name);
        cge_clear_error();
        if (taken) {
            char msg[512];
            snprintf(msg, sizeof msg, "cge_es_output: the name '%s' is already used", name);
            return cge__es_fail_status(b, msg);
        }
        free(b->final_names[t.id]);
        b->final_names[t.id] = strdup(name);
        if (!b->final_names[t.id])
            return remember(b, cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "out of memory"));
    }
    if (b->num_outputs == b->cap_outputs) {
        int32_t nc = b->cap_outputs ? b->cap_outputs * 2 : 8;
        int32_t *p = realloc(b->outputs, sizeof(int32_t) * (size_t)nc);
        if (!p)
            return remember(b, cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "out of memory"));
        b->outputs = p;
        b->cap_outputs = nc;
    }
    b->outputs[b->num_outputs++] = t.id;
    return CGE_OK;
}

cge_status cge_es_op(cge_builder *b, const char *op_type, const char *domain,
                     const cge_t *inputs, int32_t num_inputs, const cge_attr *attrs,
                     int32_t num_attrs, cge_t *outputs, int32_t num_outputs)
{
    if (!b)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "cge_es_op: builder is NULL");
    for (int32_t i = 0; outputs && i < num_outputs; i++)
        outputs[i] = CGE_INVALID;
    if (b->status)
        return b->status;
    if (!op_type || num_inputs < 0 || num_outputs < 1 || num_outputs > 1024 || !outputs ||
        (num_inputs && !inputs) || num_attrs < 0 || (num_attrs && !attrs))
        return cge__es_fail_status(b, "cge_es_op: bad op type, input, attribute or output list");
    for (int32_t i = 0; i < num_inputs; i++)
        if (inputs[i].id != CGE_NONE.id && !valid_handle(b, inputs[i])) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s: input %d is not a handle of this builder", op_type, i);
            return cge__es_fail_status(b, msg);
        }
    const cge_op_def *def = cge_op_find(domain, op_type, 0);
    if (!def)
        return remember(b, cge_last_error_status());

    char node_name[256];
    if (b->next_name) {
        snprintf(node_name, sizeof node_name, "%s", b->next_name);
        free(b->next_name);
        b->next_name = NULL;
    } else {
        snprintf(node_name, sizeof node_name, "%s_%lld", op_type, (long long)b->counter++);
    }

    cge_status st = CGE_OK;
    const char **in_names = calloc((size_t)num_inputs + 1, sizeof(char *));
    const void **values = calloc((size_t)num_inputs + 1, sizeof(void *));
    bool *present = calloc((size_t)num_inputs + 1, sizeof(bool));
    cge_tensor_desc *in_desc = calloc((size_t)num_inputs + 1, sizeof *in_desc);
    cge_tensor_desc *out_desc = calloc((size_t)num_outputs, sizeof *out_desc);
    char **out_names = calloc((size_t)num_outputs, sizeof(char *));
    cge_graph *scratch = NULL;
    cge_node *holder = NULL;
    if (!in_names || !values || !present || !in_desc || !out_desc || !out_names)
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "builder: out of memory");
    for (int32_t i = 0; !st && i < num_inputs; i++) {
        present[i] = inputs[i].id != CGE_NONE.id;
        in_names[i] = present[i] ? b->names[inputs[i].id] : "";
        in_desc[i].name = in_names[i];
        if (present[i]) {
            st = cge_graph_get_desc(b->g, in_names[i], &in_desc[i]);
            const cge_tensor *c = cge_graph_constant(b->g, in_names[i]);
            values[i] = c ? c->data : NULL;
        }
    }
    for (int32_t i = 0; !st && i < num_outputs; i++) {
        char nm[300];
        if (num_outputs == 1)
            snprintf(nm, sizeof nm, "%s", node_name);
        else
            snprintf(nm, sizeof nm, "%s:%d", node_name, i);
        out_names[i] = strdup(nm);
        if (!out_names[i])
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "builder: out of memory");
        out_desc[i].name = out_names[i];
    }
    /* Attributes are checked on a scratch node first, so that a failing call
     * leaves the builder's graph untouched. */
    if (!st)
        st = cge_graph_create("scratch", &scratch);
    if (!st)
        st = cge_graph_add_node(scratch, op_type, domain, node_name, NULL, 0, NULL, 0, &holder);
    for (int32_t i = 0; !st && i < num_attrs; i++)
        st = cge_attrs_set(cge_node_attrs(holder), &attrs[i]);
    if (!st)
        st = cge__op_check_arity(def, node_name, present, num_inputs, num_outputs);
    if (!st)
        st = cge__op_check_attrs(def, node_name, cge_node_attrs_const(holder));
    if (!st)
        st = cge__op_infer_node(def, node_name, cge_node_attrs_const(holder), in_desc, values,
                               num_inputs, out_desc, num_outputs);
    cge_node *node = NULL;
    if (!st)
        st = cge_graph_add_node(b->g, op_type, domain, node_name, in_names, num_inputs,
                                (const char *const *)out_names, num_outputs, &node);
    for (int32_t i = 0; !st && i < num_attrs; i++)
        st = cge_attrs_set(cge_node_attrs(node), &attrs[i]);
    for (int32_t i = 0; !st && i < num_outputs; i++)
        st = cge_graph_set_desc(b->g, out_names[i], out_desc[i].dtype, &out_desc[i].shape);
    for (int32_t i = 0; !st && i < num_outputs; i++) {
        outputs[i] = add_value(b, out_names[i], false);
        if (!cge_t_valid(outputs[i]))
            st = b->status;
    }
    cge_graph_destroy(scratch);
    for (int32_t i = 0; out_names && i < num_outputs; i++)
        free(out_names[i]);
    free(out_names);
    free(in_names);
    free(values);
    free(present);
    free(in_desc);
    free(out_desc);
    if (st) {
        for (int32_t i = 0; i < num_outputs; i++)
            outputs[i] = CGE_INVALID;
        remember(b, st);
    }
    return st;
}

cge_t cge_es_op1(cge_builder *b, const char *op_type, const char *domain, const cge_t *inputs,
                 int32_t num_inputs, const cge_attr *attrs, int32_t num_attrs)
{
    cge_t out = CGE_INVALID;
    cge_es_op(b, op_type, domain, inputs, num_inputs, attrs, num_attrs, &out, 1);
    return out;
}

/* The final name of a value in the finished graph. */
static const char *final_name(const cge_builder *b, const char *name, const char *const *map_from,
                              const char *const *map_to, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        if (!strcmp(map_from[i], name))
            return map_to[i];
    return name;
}

/* Copies the graph applying output renames (inputs keep their names: an
 * input marked as an output under another name gets an Identity). */
static cge_status rebuild(cge_builder *b, cge_graph **out)
{
    const char **from = calloc((size_t)b->num_values + 1, sizeof(char *));
    const char **to = calloc((size_t)b->num_values + 1, sizeof(char *));
    int32_t nmap = 0;
    cge_status st = (!from || !to) ? cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "out of memory") : CGE_OK;
    for (int32_t i = 0; !st && i < b->num_values; i++)
        if (b->final_names[i] && !b->is_input[i] && !cge_graph_constant(b->g, b->names[i])) {
            from[nmap] = b->names[i];
            to[nmap++] = b->final_names[i];
        }
    cge_graph *g = NULL;
    if (!st)
        st = cge_graph_create(cge_graph_name(b->g), &g);
    for (int32_t i = 0; !st && i < cge_graph_num_inputs(b->g); i++) {
        cge_tensor_desc d;
        st = cge_graph_get_desc(b->g, cge_graph_input(b->g, i), &d);
        if (!st)
            st = cge_graph_add_input(g, d.name, d.dtype, &d.shape);
    }
    for (int32_t i = 0; !st && i < cge_graph_num_constants(b->g); i++) {
        const char *nm = cge_graph_constant_name(b->g, i);
        const cge_tensor *t = cge_graph_constant(b->g, nm);
        st = cge_graph_add_constant(g, nm, t->dtype, &t->shape, t->data, t->bytes);
    }
    for (int32_t k = 0; !st && k < cge_graph_num_nodes(b->g); k++) {
        const cge_node *n = cge_graph_node(b->g, k);
        int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
        const char **names = calloc((size_t)(ni + no) + 1, sizeof(char *));
        if (!names) {
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "out of memory");
            break;
        }
        for (int32_t i = 0; i < ni; i++)
            names[i] = final_name(b, cge_node_input(n, i), from, to, nmap);
        for (int32_t i = 0; i < no; i++)
            names[ni + i] = final_name(b, cge_node_output(n, i), from, to, nmap);
        cge_node *copy = NULL;
        st = cge_graph_add_node(g, cge_node_op_type(n), cge_node_domain(n), cge_node_name(n),
                                names, ni, names + ni, no, &copy);
        const cge_attrs *a = cge_node_attrs_const(n);
        for (int32_t i = 0; !st && i < cge_attrs_count(a); i++)
            st = cge_attrs_set(cge_node_attrs(copy), cge_attrs_at(a, i));
        for (int32_t i = 0; !st && i < no; i++) {
            cge_tensor_desc d;
            st = cge_graph_get_desc(b->g, cge_node_output(n, i), &d);
            if (!st)
                st = cge_graph_set_desc(g, names[ni + i], d.dtype, &d.shape);
        }
        free(names);
    }
    for (int32_t i = 0; !st && i < b->num_outputs; i++) {
        int32_t id = b->outputs[i];
        const char *nm = b->names[id];
        bool keeps_name = b->is_input[id] || cge_graph_constant(b->g, nm);
        if (keeps_name && b->final_names[id]) {
            const char *in1[1] = {nm}, *out1[1] = {b->final_names[id]};
            st = cge_graph_add_node(g, "Identity", "", NULL, in1, 1, out1, 1, NULL);
            cge_tensor_desc d;
            if (!st)
                st = cge_graph_get_desc(b->g, nm, &d);
            if (!st)
                st = cge_graph_set_desc(g, out1[0], d.dtype, &d.shape);
            nm = out1[0];
        } else if (b->final_names[id]) {
            nm = b->final_names[id];
        }
        if (!st)
            st = cge_graph_add_output(g, nm);
    }
    free(from);
    free(to);
    if (st) {
        cge_graph_destroy(g);
        return st;
    }
    *out = g;
    return CGE_OK;
}

cge_status cge_builder_finish(cge_builder *b, cge_graph **out)
{
    if (!b || !out)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "cge_builder_finish: NULL argument");
    *out = NULL;
    if (b->status) {
        /* Bring the first error back as this thread's last error, in its
         * own layer: the call that failed is where to look. */
        const char *body = strstr(b->message, "] ");
        return cge_error(b->layer, b->status, "%s", body ? body + 2 : b->message);
    }
    if (b->num_outputs == 0)
        return remember(b, cge_error(CGE_LAYER_GRAPH, CGE_ERR_STATE,
                                     "builder '%s': no outputs (call cge_es_output)",
                                     cge_graph_name(b->g)));
    cge_graph *g = NULL;
    cge_status st = rebuild(b, &g);
    if (!st)
        st = cge_graph_verify(g);
    if (st) {
        cge_graph_destroy(g);
        return remember(b, st);
    }
    cge_graph_destroy(b->g);
    b->g = NULL;
    free_names(b);
    b->num_outputs = 0;
    b->status = CGE_ERR_STATE;
    snprintf(b->message, sizeof b->message, "[graph] builder already finished");
    *out = g;
    return CGE_OK;
}
