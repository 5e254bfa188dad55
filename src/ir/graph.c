/* Graphs: the value table (every named value with its descriptor), graph
 * inputs, outputs and constants, nodes in insertion order, cloning. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/shared_block.h"
#include "base/strings.h"
#include "ir/constant_block.h"
#include "ir/graph_identity.h"
#include "ir/graph_internal.h"

#define NONE_STR ""

cge_status cge__ir_node_error(const cge_node *n, cge_status st, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cge_error(CGE_LAYER_GRAPH, st, "node %s '%s': %s", n->op_type, n->name, msg);
}

static cge_status oom(const char *what, const char *name)
{
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "out of memory %s '%s'", what,
                     name ? name : "");
}

static cge_status null_graph(const char *fn)
{
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "%s: graph is NULL", fn);
}

/* ---- lifecycle ------------------------------------------------------------ */

static _Atomic uint64_t next_graph_uid = 1;

uint64_t cge__graph_uid(const cge_graph *g) { return g ? g->uid : 0; }

uint64_t cge__graph_revision(const cge_graph *g) { return g ? g->rev : 0; }

cge_status cge_graph_create(const char *name, cge_graph **out)
{
    if (!out)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "cge_graph_create: out is NULL");
    *out = NULL;
    cge_graph *g = calloc(1, sizeof *g);
    if (!g)
        return oom("creating graph", name);
    const char *nm = name ? name : "";
    size_t len = strlen(nm) + 1;
    g->name = malloc(len);
    if (!g->name) {
        free(g);
        return oom("creating graph", name);
    }
    memcpy(g->name, nm, len);
    g->uid = atomic_fetch_add_explicit(&next_graph_uid, 1, memory_order_relaxed);
    *out = g;
    return CGE_OK;
}

static void node_free(cge_node *n)
{
    if (!n)
        return;
    cge__ir_attrs_release(&n->attrs);
    free(n);
}

void cge_graph_destroy(cge_graph *g)
{
    if (!g)
        return;
    for (int32_t i = 0; i < g->num_nodes; i++)
        node_free(g->nodes[i]);
    free(g->nodes);
    for (int32_t i = 0; i < g->num_consts; i++) {
        cge__block_unref(g->consts[i]->t.data);
        free(g->consts[i]);
    }
    free(g->consts);
    free(g->inputs);
    free(g->outputs);
    free(g->values);
    free(g->optypes);
    free(g->dim_syms);
    cge__strmap_free(&g->dim_sym_map);
    cge__strmap_free(&g->value_map);
    cge__strmap_free(&g->node_map);
    cge__strmap_free(&g->optype_map);
    cge__ir_arena_free(&g->arena);
    free(g->name);
    free(g);
}

const char *cge_graph_name(const cge_graph *g) { return g ? g->name : NULL; }

/* ---- values ----------------------------------------------------------------- */

static bool shape_ok(const cge_shape *s)
{
    if (s->rank < 0 || s->rank > CGE_MAX_RANK)
        return false;
    for (int32_t i = 0; i < s->rank; i++)
        if (!cge_dim_valid(s->dims[i]))
            return false;
    return true;
}

static cge_status bad_shape(const char *what, const char *name, const cge_shape *s)
{
    if (s->rank < 0 || s->rank > CGE_MAX_RANK)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_SHAPE, "%s '%s': rank %d is out of range 0..%d",
                         what, name, (int)s->rank, CGE_MAX_RANK);
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_SHAPE,
                     "%s '%s': a dimension is not a size, -1 (dynamic) or a symbol "
                     "(CGE_DIM_SYMBOL)", what, name);
}

/* The value called `name`, created (undefined, "REF") if absent. */
static cge_status value_intern(cge_graph *g, const char *name, int32_t *out)
{
    int32_t idx = cge__strmap_get(&g->value_map, name);
    if (idx >= 0) {
        *out = idx;
        return CGE_OK;
    }
    if (!cge__ir_grow((void **)&g->values, &g->cap_values, (int64_t)g->num_values + 1,
                     sizeof(cge__ir_value)))
        return oom("adding value", name);
    const char *nm = cge__ir_arena_strdup(&g->arena, name);
    if (!nm || !cge__strmap_put(&g->value_map, nm, g->num_values))
        return oom("adding value", name);
    cge__ir_value *v = &g->values[g->num_values];
    memset(v, 0, sizeof *v);
    v->name = nm;
    v->def = -1;
    *out = g->num_values++;
    return CGE_OK;
}

/* "a graph input", "a constant", "produced by node Add 'a'" for messages. */
static const char *value_origin(const cge_graph *g, const cge__ir_value *v, char *buf, size_t size)
{
    switch (v->kind) {
    case CGE_IR_VALUE_INPUT: return "a graph input";
    case CGE_IR_VALUE_CONST: return "a constant";
    case CGE_IR_VALUE_NODE: {
        const cge_node *p = g->nodes[v->def];
        snprintf(buf, size, "produced by node %s '%s'", p->op_type, p->name);
        return buf;
    }
    default: return "undefined";
    }
}

static cge_status define_check(const cge_graph *g, const char *what, const char *name)
{
    int32_t idx = cge__strmap_get(&g->value_map, name);
    if (idx < 0 || g->values[idx].kind == CGE_IR_VALUE_REF)
        return CGE_OK;
    char buf[512];
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_EXISTS, "%s '%s': that name is already %s", what,
                     name, value_origin(g, &g->values[idx], buf, sizeof buf));
}

cge_status cge_graph_add_input(cge_graph *g, const char *name, cge_dtype dtype,
                               const cge_shape *shape)
{
    if (!g)
        return null_graph("cge_graph_add_input");
    if (!name || !name[0])
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "a graph input needs a name");
    if (!shape)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "graph input '%s': shape is NULL (use CGE_SCALAR for a scalar)", name);
    if (!shape_ok(shape))
        return bad_shape("graph input", name, shape);
    /* UNDEFINED is accepted here (an importer may not know the type yet);
     * cge_graph_verify_structure refuses it. */
    if (dtype != CGE_DTYPE_UNDEFINED && !cge_dtype_valid(dtype))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_DTYPE, "graph input '%s': invalid dtype %d",
                         name, (int)dtype);
    cge_status st = define_check(g, "graph input", name);
    if (st != CGE_OK)
        return st;
    if (!cge__ir_grow((void **)&g->inputs, &g->cap_inputs, (int64_t)g->num_inputs + 1,
                     sizeof(int32_t)))
        return oom("adding graph input", name);
    int32_t idx;
    if ((st = value_intern(g, name, &idx)) != CGE_OK)
        return st;
    cge__ir_value *v = &g->values[idx];
    v->kind = CGE_IR_VALUE_INPUT;
    v->def = g->num_inputs;
    v->dtype = dtype;
    v->shape = *shape;
    v->format = CGE_FORMAT_PLAIN;
    g->inputs[g->num_inputs++] = idx;
    return CGE_OK;
}

/* `block`: a shared block the graph takes (its reference, on failure too);
 * NULL: a block copied from `data`. */
static cge_status add_constant(cge_graph *g, const char *name, cge_dtype dtype,
                               const cge_shape *shape, const void *data, size_t bytes, void *block);
static cge_status add_constant_checked(cge_graph *g, const char *name, cge_dtype dtype,
                                       const cge_shape *shape, const void *data, size_t bytes,
                                       void *block);

cge_status cge_graph_add_constant(cge_graph *g, const char *name, cge_dtype dtype,
                                  const cge_shape *shape, const void *data, size_t bytes)
{
    return add_constant(g, name, dtype, shape, data, bytes, NULL);
}

cge_status cge__graph_add_constant_block(cge_graph *g, const char *name, cge_dtype dtype,
                                        const cge_shape *shape, void *block, size_t bytes)
{
    cge_status st = block ? add_constant(g, name, dtype, shape, block, bytes, block)
                          : cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                                      "constant '%s': block is NULL", name ? name : "");
    return st;
}

static cge_status add_constant(cge_graph *g, const char *name, cge_dtype dtype,
                               const cge_shape *shape, const void *data, size_t bytes, void *block)
{
    cge_status st = add_constant_checked(g, name, dtype, shape, data, bytes, block);
    if (st != CGE_OK)
        cge__block_unref(block);
    return st;
}

static cge_status add_constant_checked(cge_graph *g, const char *name, cge_dtype dtype,
                                       const cge_shape *shape, const void *data, size_t bytes,
                                       void *block)
{
    if (!g)
        return null_graph("cge_graph_add_constant");
    if (!name || !name[0])
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "a constant needs a name");
    if (!shape)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "constant '%s': shape is NULL (use CGE_SCALAR for a scalar)", name);
    if (!shape_ok(shape))
        return bad_shape("constant", name, shape);
    if (!cge_dtype_valid(dtype))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_DTYPE, "constant '%s': invalid dtype %d", name,
                         (int)dtype);
    char shp[CGE_SHAPE_STR_MAX];
    if (!cge_shape_is_static(shape))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_SHAPE,
                         "constant '%s': shape %s has dynamic dimensions", name,
                         cge_shape_str(shape, shp, sizeof shp));
    size_t need = cge_tensor_nbytes(dtype, shape);
    if (bytes != need)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "constant '%s': %s %s needs %zu bytes, %zu given", name,
                         cge_dtype_name(dtype), cge_shape_str(shape, shp, sizeof shp), need, bytes);
    if (bytes && !data)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "constant '%s': data is NULL",
                         name);
    cge_status st = define_check(g, "constant", name);
    if (st != CGE_OK)
        return st;
    if (!cge__ir_grow((void **)&g->consts, &g->cap_consts, (int64_t)g->num_consts + 1,
                     sizeof(cge__ir_const *)))
        return oom("adding constant", name);
    cge__ir_const *c = calloc(1, sizeof *c);
    if (!c)
        return oom("adding constant", name);
    if (block) {
        c->t.data = block;
    } else if (dtype == CGE_STRING) {
        /* The constant owns its strings: its block holds the elements, then
         * their bytes, which the elements point at (base/strings.h). */
        int64_t n = cge_shape_numel(shape);
        size_t packed = cge__strings_packed_size(data, n);
        if (packed == SIZE_MAX) {
            free(c);
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                             "constant '%s': a string element has a negative size or NULL data",
                             name);
        }
        c->t.data = cge__block_new(NULL, packed);
        if (c->t.data)
            cge__strings_pack(c->t.data, data, n);
    } else {
        c->t.data = cge__block_new(data, bytes);
    }
    int32_t idx = -1;
    if (!c->t.data)
        st = oom("copying constant", name);
    else
        st = value_intern(g, name, &idx);
    if (st != CGE_OK) {
        if (!block)
            cge__block_unref(c->t.data);
        free(c);
        return st;
    }
    cge__ir_value *v = &g->values[idx];
    v->kind = CGE_IR_VALUE_CONST;
    v->def = g->num_consts;
    v->dtype = dtype;
    v->shape = *shape;
    v->format = CGE_FORMAT_PLAIN;
    c->value = idx;
    c->t.name = v->name;
    c->t.dtype = dtype;
    c->t.shape = *shape;
    c->t.bytes = bytes;
    g->consts[g->num_consts++] = c;
    return CGE_OK;
}

cge_status cge_graph_add_output(cge_graph *g, const char *name)
{
    if (!g)
        return null_graph("cge_graph_add_output");
    if (!name || !name[0])
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "a graph output needs a name");
    int32_t idx = cge__strmap_get(&g->value_map, name);
    if (idx >= 0 && g->values[idx].is_output)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_EXISTS, "'%s' is already a graph output", name);
    if (!cge__ir_grow((void **)&g->outputs, &g->cap_outputs, (int64_t)g->num_outputs + 1,
                     sizeof(int32_t)))
        return oom("adding graph output", name);
    cge_status st = value_intern(g, name, &idx);
    if (st != CGE_OK)
        return st;
    g->values[idx].is_output = true;
    g->outputs[g->num_outputs++] = idx;
    return CGE_OK;
}

/* ---- nodes ------------------------------------------------------------------ */

/* Interned op type and its counter for automatic names. */
static int32_t optype_intern(cge_graph *g, const char *op_type)
{
    int32_t idx = cge__strmap_get(&g->optype_map, op_type);
    if (idx >= 0)
        return idx;
    if (!cge__ir_grow((void **)&g->optypes, &g->cap_optypes, (int64_t)g->num_optypes + 1,
                     sizeof(cge__ir_optype)))
        return -1;
    const char *nm = cge__ir_arena_strdup(&g->arena, op_type);
    if (!nm || !cge__strmap_put(&g->optype_map, nm, g->num_optypes))
        return -1;
    g->optypes[g->num_optypes] = (cge__ir_optype){.name = nm, .next = 0};
    return g->num_optypes++;
}

/* "<op_type>_<n>" with n counting per op type, skipping names taken by
 * explicitly named nodes; the counter only grows, so this is amortised O(1). */
static const char *auto_name(cge_graph *g, int32_t optype)
{
    cge__ir_optype *ot = &g->optypes[optype];
    size_t size = strlen(ot->name) + 24;
    char *buf = cge__ir_arena_alloc(&g->arena, size);
    if (!buf)
        return NULL;
    do {
        snprintf(buf, size, "%s_%lld", ot->name, (long long)ot->next++);
    } while (cge__strmap_get(&g->node_map, buf) >= 0);
    return buf;
}

cge_status cge_graph_add_node(cge_graph *g, const char *op_type, const char *domain,
                              const char *name, const char *const *inputs, int32_t num_inputs,
                              const char *const *outputs, int32_t num_outputs, cge_node **out)
{
    if (out)
        *out = NULL;
    if (!g)
        return null_graph("cge_graph_add_node");
    if (!op_type || !op_type[0])
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "node '%s': op type is empty",
                         name ? name : "");
    bool named = name && name[0];
    /* What error messages call the node before it has its final name. */
    const char *label = named ? name : "(unnamed)";
    if (num_inputs < 0 || num_outputs < 0 || (num_inputs && !inputs) ||
        (num_outputs && !outputs))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "node %s '%s': bad input/output arrays (%d inputs, %d outputs)", op_type,
                         label, (int)num_inputs, (int)num_outputs);
    if (named) {
        int32_t other = cge__strmap_get(&g->node_map, name);
        if (other >= 0)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_EXISTS,
                             "node %s '%s': the name is already used by node %s '%s'", op_type,
                             name, g->nodes[other]->op_type, name);
    }

    /* Check every output against existing values before changing anything;
     * outputs listed twice are caught below, once every name has a value. */
    for (int32_t i = 0; i < num_outputs; i++) {
        const char *o = outputs[i];
        if (!o || !o[0])
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                             "node %s '%s': output %d has no name", op_type, label, (int)i);
        int32_t idx = cge__strmap_get(&g->value_map, o);
        if (idx < 0)
            continue;
        cge__ir_value *v = &g->values[idx];
        if (v->kind != CGE_IR_VALUE_REF) {
            char buf[512];
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_EXISTS,
                             "node %s '%s': output '%s' is already %s", op_type, label, o,
                             value_origin(g, v, buf, sizeof buf));
        }
    }

    if (!cge__ir_grow((void **)&g->nodes, &g->cap_nodes, (int64_t)g->num_nodes + 1,
                     sizeof(cge_node *)))
        return oom("adding node", label);
    size_t size = sizeof(cge_node) + ((size_t)num_inputs + (size_t)num_outputs) * sizeof(int32_t);
    cge_node *n = calloc(1, size);
    if (!n)
        return oom("adding node", label);
    n->graph = g;
    n->index = g->num_nodes;
    n->num_inputs = num_inputs;
    n->num_outputs = num_outputs;
    n->inputs = (int32_t *)(n + 1);
    n->outputs = n->inputs + num_inputs;
    cge__ir_attrs_init(&n->attrs, n);

    cge_status st = CGE_OK;
    int32_t ot = optype_intern(g, op_type);
    if (ot < 0) {
        st = oom("adding node", label);
        goto fail;
    }
    n->op_type = g->optypes[ot].name;
    n->domain = domain && domain[0] ? cge__ir_arena_strdup(&g->arena, domain) : NONE_STR;
    n->name = named ? cge__ir_arena_strdup(&g->arena, name) : auto_name(g, ot);
    if (!n->domain || !n->name) {
        st = oom("adding node", label);
        goto fail;
    }
    for (int32_t i = 0; i < num_inputs; i++) {
        n->inputs[i] = -1;
        if (inputs[i] && inputs[i][0] && (st = value_intern(g, inputs[i], &n->inputs[i])))
            goto fail;
    }
    if (++g->stamp == 0)   /* 0 is what fresh values carry */
        g->stamp = 1;
    uint32_t stamp = g->stamp;
    for (int32_t i = 0; i < num_outputs; i++) {
        if ((st = value_intern(g, outputs[i], &n->outputs[i])) != CGE_OK)
            goto fail;
        cge__ir_value *v = &g->values[n->outputs[i]];
        if (v->stamp == stamp) {
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_EXISTS,
                           "node %s '%s': output '%s' is listed twice", op_type, n->name,
                           outputs[i]);
            goto fail;
        }
        v->stamp = stamp;
    }
    if (!cge__strmap_put(&g->node_map, n->name, n->index)) {
        st = oom("adding node", n->name);
        goto fail;
    }
    /* Commit: nothing below can fail. */
    for (int32_t i = 0; i < num_outputs; i++) {
        cge__ir_value *v = &g->values[n->outputs[i]];
        v->kind = CGE_IR_VALUE_NODE;
        v->def = n->index;
    }
    g->nodes[g->num_nodes++] = n;
    cge__ir_touch(n);
    if (out)
        *out = n;
    return CGE_OK;

fail:
    /* Values interned on the way stay as undefined names: harmless, since
     * nothing refers to them and verify checks only what nodes reference. */
    node_free(n);
    return st;
}

/* ---- accessors -------------------------------------------------------------- */

int32_t cge_graph_num_inputs(const cge_graph *g) { return g ? g->num_inputs : 0; }

const char *cge_graph_input(const cge_graph *g, int32_t i)
{
    if (!g || i < 0 || i >= g->num_inputs)
        return NULL;
    return g->values[g->inputs[i]].name;
}

int32_t cge_graph_num_outputs(const cge_graph *g) { return g ? g->num_outputs : 0; }

const char *cge_graph_output(const cge_graph *g, int32_t i)
{
    if (!g || i < 0 || i >= g->num_outputs)
        return NULL;
    return g->values[g->outputs[i]].name;
}

int32_t cge_graph_num_nodes(const cge_graph *g) { return g ? g->num_nodes : 0; }

cge_node *cge_graph_node(const cge_graph *g, int32_t i)
{
    if (!g || i < 0 || i >= g->num_nodes)
        return NULL;
    return g->nodes[i];
}

cge_node *cge_graph_find_node(const cge_graph *g, const char *name)
{
    if (!g || !name)
        return NULL;
    int32_t i = cge__strmap_get(&g->node_map, name);
    return i >= 0 ? g->nodes[i] : NULL;
}

int32_t cge_graph_num_constants(const cge_graph *g) { return g ? g->num_consts : 0; }

const char *cge_graph_constant_name(const cge_graph *g, int32_t i)
{
    if (!g || i < 0 || i >= g->num_consts)
        return NULL;
    return g->consts[i]->t.name;
}

static cge__ir_value *value_lookup(const cge_graph *g, const char *name)
{
    if (!g || !name)
        return NULL;
    int32_t i = cge__strmap_get(&g->value_map, name);
    return i >= 0 ? &g->values[i] : NULL;
}

cge_status cge_graph_get_desc(const cge_graph *g, const char *name, cge_tensor_desc *out)
{
    if (!g || !out)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "cge_graph_get_desc: graph or out is NULL");
    const cge__ir_value *v = value_lookup(g, name);
    if (!v)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NOT_FOUND, "graph '%s' has no value '%s'",
                         g->name, name ? name : "(null)");
    out->name = v->name;
    out->dtype = v->dtype;
    out->shape = v->shape;
    out->format = v->format;
    out->type = (cge_value_type)v->vtype;
    return CGE_OK;
}

cge_status cge_graph_set_desc(cge_graph *g, const char *name, cge_dtype dtype,
                              const cge_shape *shape)
{
    if (!g)
        return null_graph("cge_graph_set_desc");
    cge__ir_value *v = value_lookup(g, name);
    if (!v)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NOT_FOUND, "graph '%s' has no value '%s'",
                         g->name, name ? name : "(null)");
    if (dtype != CGE_DTYPE_UNDEFINED && !cge_dtype_valid(dtype))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_DTYPE, "value '%s': invalid dtype %d", name,
                         (int)dtype);
    /* shape NULL sets only the dtype. A sequence's or optional's element
     * shape may be of unknown rank (-1: elements of any rank). */
    if (shape && !shape_ok(shape) && !(v->vtype != CGE_TYPE_TENSOR && shape->rank == -1))
        return bad_shape("value", name, shape);
    if (v->kind == CGE_IR_VALUE_CONST &&
        (dtype != v->dtype || (shape && !cge_shape_equal(shape, &v->shape)))) {
        char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_STATE,
                         "constant '%s' is %s %s; its descriptor cannot become %s %s", name,
                         cge_dtype_name(v->dtype), cge_graph_shape_str(g, &v->shape, a, sizeof a),
                         cge_dtype_name(dtype),
                         shape ? cge_graph_shape_str(g, shape, b, sizeof b) : "(same shape)");
    }
    if (v->dtype != dtype || (shape && !cge_shape_equal(shape, &v->shape)))
        v->rev = ++g->rev;
    v->dtype = dtype;
    if (shape)
        v->shape = *shape;
    return CGE_OK;
}

cge_status cge_graph_set_format(cge_graph *g, const char *name, cge_format format)
{
    if (!g)
        return null_graph("cge_graph_set_format");
    cge__ir_value *v = value_lookup(g, name);
    if (!v)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NOT_FOUND, "graph '%s' has no value '%s'",
                         g->name, name ? name : "(null)");
    if (format != CGE_FORMAT_PLAIN && format != CGE_FORMAT_NHWC && format != CGE_FORMAT_BLOCKED)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "value '%s': invalid format %d",
                         name, (int)format);
    if (v->format != format)
        v->rev = ++g->rev;
    v->format = format;
    return CGE_OK;
}

const cge_tensor *cge_graph_constant(const cge_graph *g, const char *name)
{
    const cge__ir_value *v = value_lookup(g, name);
    if (!v || v->kind != CGE_IR_VALUE_CONST)
        return NULL;
    return &g->consts[v->def]->t;
}

cge_node *cge_graph_producer(const cge_graph *g, const char *name)
{
    const cge__ir_value *v = value_lookup(g, name);
    if (!v || v->kind != CGE_IR_VALUE_NODE)
        return NULL;
    return g->nodes[v->def];
}

/* ---- node accessors --------------------------------------------------------- */

const char *cge_node_op_type(const cge_node *n) { return n ? n->op_type : NULL; }
const char *cge_node_domain(const cge_node *n) { return n ? n->domain : NULL; }
const char *cge_node_name(const cge_node *n) { return n ? n->name : NULL; }
int32_t cge_node_num_inputs(const cge_node *n) { return n ? n->num_inputs : 0; }
int32_t cge_node_num_outputs(const cge_node *n) { return n ? n->num_outputs : 0; }

const char *cge_node_input(const cge_node *n, int32_t i)
{
    if (!n || i < 0 || i >= n->num_inputs)
        return NULL;
    return n->inputs[i] < 0 ? NONE_STR : n->graph->values[n->inputs[i]].name;
}

const char *cge_node_output(const cge_node *n, int32_t i)
{
    if (!n || i < 0 || i >= n->num_outputs)
        return NULL;
    return n->graph->values[n->outputs[i]].name;
}

cge_attrs *cge_node_attrs(cge_node *n) { return n ? &n->attrs : NULL; }
const cge_attrs *cge_node_attrs_const(const cge_node *n) { return n ? &n->attrs : NULL; }

/* ---- clone ------------------------------------------------------------------ */

/* Copy an int32 array into a fresh one of capacity max(n, 1). */
static bool dup_ints(int32_t **dst, int32_t *cap, const int32_t *src, int32_t n)
{
    *dst = NULL;
    *cap = 0;
    if (!n)
        return true;
    if (!cge__ir_grow((void **)dst, cap, n, sizeof(int32_t)))
        return false;
    memcpy(*dst, src, (size_t)n * sizeof(int32_t));
    return true;
}

cge_status cge_graph_set_value_type(cge_graph *g, const char *name, cge_value_type type)
{
    if (!g)
        return null_graph("cge_graph_set_value_type");
    cge__ir_value *v = value_lookup(g, name);
    if (!v)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NOT_FOUND, "graph '%s' has no value '%s'",
                         g->name, name ? name : "(null)");
    if ((int)type < CGE_TYPE_TENSOR || type > CGE_TYPE_OPTIONAL_SEQUENCE)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "value '%s': invalid type %d",
                         name, (int)type);
    if (v->kind == CGE_IR_VALUE_CONST && type != CGE_TYPE_TENSOR)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_STATE,
                         "constant '%s' is a tensor; it cannot become a %s", name,
                         cge_value_type_name(type));
    if (v->vtype != (uint8_t)type)
        v->rev = ++g->rev;
    v->vtype = (uint8_t)type;
    return CGE_OK;
}

bool cge_graph_has_non_tensor_values(const cge_graph *g)
{
    for (int32_t i = 0; g && i < g->num_values; i++)
        if (g->values[i].vtype != CGE_TYPE_TENSOR && g->values[i].kind != CGE_IR_VALUE_REF)
            return true;
    return false;
}

static cge_status clone_into(const cge_graph *g, cge_graph *c)
{
    /* Values keep their indices, so inputs/outputs/node arrays copy verbatim. */
    if (g->num_values) {
        if (!cge__ir_grow((void **)&c->values, &c->cap_values, g->num_values,
                         sizeof(cge__ir_value)))
            return oom("cloning graph", g->name);
        for (int32_t i = 0; i < g->num_values; i++) {
            c->values[i] = g->values[i];
            c->values[i].stamp = 0;
            c->values[i].name = cge__ir_arena_strdup(&c->arena, g->values[i].name);
            if (!c->values[i].name || !cge__strmap_put(&c->value_map, c->values[i].name, i))
                return oom("cloning graph", g->name);
            c->num_values++;
        }
    }
    if (!dup_ints(&c->inputs, &c->cap_inputs, g->inputs, g->num_inputs))
        return oom("cloning graph", g->name);
    c->num_inputs = g->num_inputs;
    if (!dup_ints(&c->outputs, &c->cap_outputs, g->outputs, g->num_outputs))
        return oom("cloning graph", g->name);
    c->num_outputs = g->num_outputs;

    if (g->num_consts &&
        !cge__ir_grow((void **)&c->consts, &c->cap_consts, g->num_consts, sizeof(cge__ir_const *)))
        return oom("cloning graph", g->name);
    for (int32_t i = 0; i < g->num_consts; i++) {
        const cge__ir_const *src = g->consts[i];
        cge__ir_const *k = malloc(sizeof *k);
        if (!k)
            return oom("cloning graph", g->name);
        *k = *src;
        k->t.name = c->values[src->value].name;
        k->t.data = cge__block_ref(src->t.data);
        c->consts[c->num_consts++] = k;
    }

    if (g->num_optypes) {
        if (!cge__ir_grow((void **)&c->optypes, &c->cap_optypes, g->num_optypes,
                         sizeof(cge__ir_optype)))
            return oom("cloning graph", g->name);
        for (int32_t i = 0; i < g->num_optypes; i++) {
            c->optypes[i].next = g->optypes[i].next;
            c->optypes[i].name = cge__ir_arena_strdup(&c->arena, g->optypes[i].name);
            if (!c->optypes[i].name || !cge__strmap_put(&c->optype_map, c->optypes[i].name, i))
                return oom("cloning graph", g->name);
            c->num_optypes++;
        }
    }

    if (g->num_dim_syms) {
        if (!cge__ir_grow((void **)&c->dim_syms, &c->cap_dim_syms, g->num_dim_syms,
                         sizeof(const char *)))
            return oom("cloning graph", g->name);
        for (int32_t i = 0; i < g->num_dim_syms; i++) {
            c->dim_syms[i] = cge__ir_arena_strdup(&c->arena, g->dim_syms[i]);
            if (!c->dim_syms[i] || !cge__strmap_put(&c->dim_sym_map, c->dim_syms[i], i))
                return oom("cloning graph", g->name);
            c->num_dim_syms++;
        }
    }

    if (g->num_nodes &&
        !cge__ir_grow((void **)&c->nodes, &c->cap_nodes, g->num_nodes, sizeof(cge_node *)))
        return oom("cloning graph", g->name);
    for (int32_t i = 0; i < g->num_nodes; i++) {
        const cge_node *src = g->nodes[i];
        size_t size = sizeof(cge_node) +
                      ((size_t)src->num_inputs + (size_t)src->num_outputs) * sizeof(int32_t);
        cge_node *n = calloc(1, size);
        if (!n)
            return oom("cloning node", src->name);
        n->graph = c;
        n->index = i;
        n->num_inputs = src->num_inputs;
        n->num_outputs = src->num_outputs;
        n->inputs = (int32_t *)(n + 1);
        n->outputs = n->inputs + n->num_inputs;
        memcpy(n->inputs, src->inputs,
               ((size_t)src->num_inputs + (size_t)src->num_outputs) * sizeof(int32_t));
        cge__ir_attrs_init(&n->attrs, n);
        n->op_type = c->optypes[cge__strmap_get(&c->optype_map, src->op_type)].name;
        n->domain = src->domain[0] ? cge__ir_arena_strdup(&c->arena, src->domain) : NONE_STR;
        n->name = cge__ir_arena_strdup(&c->arena, src->name);
        n->removed = src->removed;
        /* The node joins the graph first so that destroy frees it on failure. */
        c->nodes[c->num_nodes++] = n;
        if (!n->domain || !n->name ||
            (!n->removed && !cge__strmap_put(&c->node_map, n->name, i)))
            return oom("cloning node", src->name);
        cge_status st = cge__ir_attrs_copy(&n->attrs, &src->attrs);
        if (st != CGE_OK)
            return st;
    }
    c->stamp = 0;
    return CGE_OK;
}

static int64_t clone_count;

int64_t cge_graph_clone_count(void) { return __atomic_load_n(&clone_count, __ATOMIC_RELAXED); }

cge_status cge_graph_clone(const cge_graph *g, cge_graph **out)
{
    __atomic_fetch_add(&clone_count, 1, __ATOMIC_RELAXED);
    if (!out)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "cge_graph_clone: out is NULL");
    *out = NULL;
    if (!g)
        return null_graph("cge_graph_clone");
    cge_graph *c = NULL;
    cge_status st = cge_graph_create(g->name, &c);
    if (st != CGE_OK)
        return st;
    if ((st = clone_into(g, c)) != CGE_OK) {
        cge_graph_destroy(c);
        return st;
    }
    *out = c;
    return CGE_OK;
}

/* ---- symbolic dimensions ------------------------------------------------ */

int64_t cge_graph_dim_symbol(cge_graph *g, const char *name)
{
    if (!g || !name || !name[0]) {
        cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "dim_symbol: %s",
                  g ? "the name is empty" : "graph is NULL");
        return CGE_DIM_DYNAMIC;
    }
    int32_t k = cge__strmap_get(&g->dim_sym_map, name);
    if (k >= 0)
        return CGE_DIM_SYMBOL(k);
    if (g->num_dim_syms >= CGE_DIM_DERIVED_FIRST ||   /* ids above encode derived symbols */
        !cge__ir_grow((void **)&g->dim_syms, &g->cap_dim_syms, (int64_t)g->num_dim_syms + 1,
                     sizeof(const char *))) {
        oom("adding dimension symbol", name);
        return CGE_DIM_DYNAMIC;
    }
    const char *nm = cge__ir_arena_strdup(&g->arena, name);
    if (!nm || !cge__strmap_put(&g->dim_sym_map, nm, g->num_dim_syms)) {
        oom("adding dimension symbol", name);
        return CGE_DIM_DYNAMIC;
    }
    g->dim_syms[g->num_dim_syms] = nm;
    return CGE_DIM_SYMBOL(g->num_dim_syms++);
}

const char *cge_graph_dim_symbol_name(const cge_graph *g, int64_t dim)
{
    int64_t k = cge_dim_symbol_id(dim);
    return g && k >= 0 && k < g->num_dim_syms ? g->dim_syms[k] : NULL;
}

int32_t cge_graph_num_dim_symbols(const cge_graph *g) { return g ? g->num_dim_syms : 0; }

static const char *sym_name_cb(int64_t dim, const void *user)
{
    return cge_graph_dim_symbol_name(user, dim);
}

char *cge_graph_shape_str(const cge_graph *g, const cge_shape *s, char *buf, size_t size)
{
    return cge_shape_str_named(s, sym_name_cb, g, buf, size);
}

bool cge_graph_find_dim_conflict(const cge_graph *g, const cge_shape *shapes, int32_t n,
                                 cge_dim_conflict *out)
{
    if (!g || !shapes || n > g->num_inputs)
        return false;
    /* Each symbolic position against the symbol's first position: quadratic
     * in the symbolic dims only, which are few. */
    for (int32_t i = 0; i < n; i++) {
        const cge_shape *di = &g->values[g->inputs[i]].shape;
        for (int32_t a = 0; a < di->rank && a < shapes[i].rank; a++) {
            int64_t sym = di->dims[a];
            if (!cge_dim_is_symbol(sym))
                continue;
            for (int32_t j = 0; j <= i; j++) {
                const cge_shape *dj = &g->values[g->inputs[j]].shape;
                int32_t lim = j == i ? a : dj->rank;
                int32_t b = 0;
                while (b < lim && b < shapes[j].rank && dj->dims[b] != sym)
                    b++;
                if (b >= lim || b >= shapes[j].rank)
                    continue;
                if (shapes[j].dims[b] != shapes[i].dims[a]) {
                    if (out)
                        *out = (cge_dim_conflict){.symbol = sym, .input = {j, i}, .axis = {b, a},
                                                  .size = {shapes[j].dims[b], shapes[i].dims[a]}};
                    return true;
                }
                j = i;   /* the first position agrees: this one is fine */
            }
        }
    }
    return false;
}
