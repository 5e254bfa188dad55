/* Graph rewriting for compiler passes: value ids, rewiring node inputs and
 * outputs, removing nodes and constants (detached at once, dropped by
 * compaction), moving nodes and renaming values. */
#include <stdlib.h>
#include <string.h>

#include "base/shared_block.h"
#include "ir/constant_block.h"
#include "ir/graph_internal.h"

static cge_status bad_arg(const char *fn, const char *what)
{
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "%s: %s", fn, what);
}

/* Same as graph.c's: the value called `name`, created undefined if absent. */
static cge_status intern(cge_graph *g, const char *name, int32_t *out)
{
    int32_t idx = cge__strmap_get(&g->value_map, name);
    if (idx >= 0) {
        *out = idx;
        return CGE_OK;
    }
    if (!cge__ir_grow((void **)&g->values, &g->cap_values, (int64_t)g->num_values + 1,
                     sizeof(cge__ir_value)))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "out of memory adding value '%s'",
                         name);
    const char *nm = cge__ir_arena_strdup(&g->arena, name);
    if (!nm || !cge__strmap_put(&g->value_map, nm, g->num_values))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "out of memory adding value '%s'",
                         name);
    cge__ir_value *v = &g->values[g->num_values];
    memset(v, 0, sizeof *v);
    v->name = nm;
    v->def = -1;
    *out = g->num_values++;
    return CGE_OK;
}

static bool valid_id(const cge_graph *g, int32_t id) { return g && id >= 0 && id < g->num_values; }

/* ---- ids ------------------------------------------------------------------ */

int32_t cge_graph_num_values(const cge_graph *g) { return g ? g->num_values : 0; }

int32_t cge_graph_value_id(const cge_graph *g, const char *name)
{
    return g && name ? cge__strmap_get(&g->value_map, name) : -1;
}

const char *cge_graph_value_name(const cge_graph *g, int32_t id)
{
    return valid_id(g, id) ? g->values[id].name : NULL;
}

cge_value_kind cge_graph_value_kind(const cge_graph *g, int32_t id)
{
    if (!valid_id(g, id))
        return CGE_VALUE_UNDEFINED;
    switch (g->values[id].kind) {
    case CGE_IR_VALUE_INPUT: return CGE_VALUE_INPUT;
    case CGE_IR_VALUE_CONST: return CGE_VALUE_CONSTANT;
    case CGE_IR_VALUE_NODE: return CGE_VALUE_NODE;
    default: return CGE_VALUE_UNDEFINED;
    }
}

bool cge_graph_value_is_output(const cge_graph *g, int32_t id)
{
    return valid_id(g, id) && g->values[id].is_output;
}

cge_status cge_graph_value_desc(const cge_graph *g, int32_t id, cge_tensor_desc *out)
{
    if (!valid_id(g, id) || !out)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NOT_FOUND, "graph has no value id %d", (int)id);
    const cge__ir_value *v = &g->values[id];
    *out = (cge_tensor_desc){.name = v->name, .dtype = v->dtype, .shape = v->shape,
                             .format = v->format};
    return CGE_OK;
}

cge_node *cge_graph_value_producer(const cge_graph *g, int32_t id)
{
    if (!valid_id(g, id) || g->values[id].kind != CGE_IR_VALUE_NODE)
        return NULL;
    return g->nodes[g->values[id].def];
}

const cge_tensor *cge_graph_value_constant(const cge_graph *g, int32_t id)
{
    if (!valid_id(g, id) || g->values[id].kind != CGE_IR_VALUE_CONST)
        return NULL;
    return &g->consts[g->values[id].def]->t;
}

int32_t cge_node_index(const cge_node *n) { return n ? n->index : -1; }

uint64_t cge_graph_revision(const cge_graph *g) { return g ? g->rev : 0; }
uint64_t cge_node_revision(const cge_node *n) { return n ? n->rev : 0; }

uint64_t cge_graph_value_revision(const cge_graph *g, int32_t id)
{
    return g && id >= 0 && id < g->num_values ? g->values[id].rev : 0;
}

int32_t cge_node_input_id(const cge_node *n, int32_t i)
{
    return n && i >= 0 && i < n->num_inputs ? n->inputs[i] : -1;
}

int32_t cge_node_output_id(const cge_node *n, int32_t i)
{
    return n && i >= 0 && i < n->num_outputs ? n->outputs[i] : -1;
}

/* ---- rewiring --------------------------------------------------------------- */

cge_status cge_node_set_input(cge_node *n, int32_t i, const char *name)
{
    if (!n || n->removed)
        return bad_arg("cge_node_set_input", "node is NULL or removed");
    if (i < 0 || i >= n->num_inputs)
        return cge__ir_node_error(n, CGE_ERR_INVALID_ARG, "has no input %d", (int)i);
    cge__ir_touch(n);
    if (!name || !name[0]) {
        n->inputs[i] = -1;
        return CGE_OK;
    }
    return intern(n->graph, name, &n->inputs[i]);
}

cge_status cge_node_set_output(cge_node *n, int32_t i, const char *name)
{
    if (!n || n->removed || !name || !name[0])
        return bad_arg("cge_node_set_output", "node is NULL or removed, or name is empty");
    if (i < 0 || i >= n->num_outputs)
        return cge__ir_node_error(n, CGE_ERR_INVALID_ARG, "has no output %d", (int)i);
    cge_graph *g = n->graph;
    int32_t id = -1;
    cge_status st = intern(g, name, &id);
    if (st)
        return st;
    int32_t old = n->outputs[i];
    if (id == old)
        return CGE_OK;
    cge__ir_value *v = &g->values[id];
    if (v->kind != CGE_IR_VALUE_REF)
        return cge__ir_node_error(n, CGE_ERR_EXISTS, "cannot produce '%s': it is already defined",
                                 name);
    for (int32_t k = 0; k < n->num_outputs; k++)
        if (n->outputs[k] == id)
            return cge__ir_node_error(n, CGE_ERR_EXISTS, "already produces '%s'", name);
    cge__ir_value *o = &g->values[old];
    v->kind = CGE_IR_VALUE_NODE;
    v->def = n->index;
    v->dtype = o->dtype;
    v->shape = o->shape;
    v->format = o->format;
    o->kind = CGE_IR_VALUE_REF;
    o->def = -1;
    n->outputs[i] = id;
    cge__ir_touch(n);
    return CGE_OK;
}

cge_status cge_graph_replace_uses(cge_graph *g, const char *from, const char *to)
{
    if (!g || !from || !to || !to[0])
        return bad_arg("cge_graph_replace_uses", "graph or a name is NULL/empty");
    int32_t f = cge__strmap_get(&g->value_map, from);
    if (f < 0)
        return CGE_OK;
    int32_t t = -1;
    cge_status st = intern(g, to, &t);
    if (st)
        return st;
    for (int32_t i = 0; i < g->num_nodes; i++) {
        cge_node *n = g->nodes[i];
        for (int32_t k = 0; k < n->num_inputs; k++)
            if (n->inputs[k] == f) {
                n->inputs[k] = t;
                cge__ir_touch(n);
            }
    }
    return CGE_OK;
}

/* ---- removal ------------------------------------------------------------------ */

cge_status cge_graph_remove_node(cge_graph *g, cge_node *n)
{
    if (!g || !n || n->graph != g)
        return bad_arg("cge_graph_remove_node", "graph or node is NULL, or the node is not in it");
    if (n->removed)
        return CGE_OK;
    for (int32_t k = 0; k < n->num_outputs; k++) {
        cge__ir_value *v = &g->values[n->outputs[k]];
        if (v->kind == CGE_IR_VALUE_NODE && v->def == n->index) {
            v->kind = CGE_IR_VALUE_REF;
            v->def = -1;
        }
    }
    /* The key stays (names live in the arena); -1 reads as absent. */
    if (cge__strmap_get(&g->node_map, n->name) == n->index &&
        !cge__strmap_put(&g->node_map, n->name, -1))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "node map lost '%s'", n->name);
    n->num_inputs = 0;
    n->num_outputs = 0;
    n->removed = true;
    return CGE_OK;
}

bool cge_node_is_removed(const cge_node *n) { return !n || n->removed; }

cge_status cge_graph_remove_constant(cge_graph *g, const char *name)
{
    if (!g || !name)
        return bad_arg("cge_graph_remove_constant", "graph or name is NULL");
    int32_t id = cge__strmap_get(&g->value_map, name);
    if (id < 0 || g->values[id].kind != CGE_IR_VALUE_CONST)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NOT_FOUND, "graph '%s' has no constant '%s'",
                         g->name, name);
    cge__ir_value *v = &g->values[id];
    cge__ir_const *c = g->consts[v->def];
    cge__block_unref(c->t.data);
    c->t.data = NULL;
    c->t.bytes = 0;
    c->removed = true;
    v->kind = CGE_IR_VALUE_REF;
    v->def = -1;
    return CGE_OK;
}

bool cge__graph_release_constant_data(cge_graph *g, const char *name, const void *data)
{
    int32_t id = g && name ? cge__strmap_get(&g->value_map, name) : -1;
    if (id < 0 || g->values[id].kind != CGE_IR_VALUE_CONST)
        return false;
    cge__ir_const *c = g->consts[g->values[id].def];
    if (c->released || !c->t.data || c->t.data != data)
        return false;
    cge__block_unref(c->t.data);
    c->t.data = NULL;
    c->released = true;
    return true;
}

cge_status cge_graph_compact(cge_graph *g)
{
    if (!g)
        return bad_arg("cge_graph_compact", "graph is NULL");
    int32_t k = 0;
    for (int32_t i = 0; i < g->num_nodes; i++) {
        cge_node *n = g->nodes[i];
        if (n->removed) {
            cge__ir_attrs_release(&n->attrs);
            free(n);
            continue;
        }
        if (n->index != k) {
            n->index = k;
            for (int32_t o = 0; o < n->num_outputs; o++) {
                cge__ir_value *v = &g->values[n->outputs[o]];
                if (v->kind == CGE_IR_VALUE_NODE)
                    v->def = k;
            }
            if (!cge__strmap_put(&g->node_map, n->name, k))
                return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "node map lost '%s'",
                                 n->name);
        }
        g->nodes[k++] = n;
    }
    g->num_nodes = k;
    k = 0;
    for (int32_t i = 0; i < g->num_consts; i++) {
        cge__ir_const *c = g->consts[i];
        if (c->removed) {
            cge__block_unref(c->t.data);
            free(c);
            continue;
        }
        g->values[c->value].def = k;
        g->consts[k++] = c;
    }
    g->num_consts = k;
    return CGE_OK;
}

cge_status cge_graph_move_node(cge_graph *g, cge_node *n, int32_t position)
{
    if (!g || !n || n->graph != g || position < 0 || position >= g->num_nodes)
        return bad_arg("cge_graph_move_node", "bad graph, node or position");
    int32_t from = n->index;
    if (from == position)
        return CGE_OK;
    int32_t lo = from < position ? from : position, hi = from < position ? position : from;
    if (from < position)
        memmove(&g->nodes[from], &g->nodes[from + 1], sizeof(cge_node *) * (size_t)(position - from));
    else
        memmove(&g->nodes[position + 1], &g->nodes[position], sizeof(cge_node *) * (size_t)(from - position));
    g->nodes[position] = n;
    for (int32_t i = lo; i <= hi; i++) {
        cge_node *m = g->nodes[i];
        m->index = i;
        for (int32_t o = 0; o < m->num_outputs; o++)
            g->values[m->outputs[o]].def = i;
        if (!m->removed && !cge__strmap_put(&g->node_map, m->name, i))
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "node map lost '%s'", m->name);
    }
    return CGE_OK;
}

cge_status cge_graph_rename_value(cge_graph *g, const char *from, const char *to)
{
    if (!g || !from || !to || !to[0])
        return bad_arg("cge_graph_rename_value", "graph or a name is NULL/empty");
    int32_t id = cge__strmap_get(&g->value_map, from);
    if (id < 0)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NOT_FOUND, "graph '%s' has no value '%s'",
                         g->name, from);
    if (cge__strmap_get(&g->value_map, to) >= 0)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_EXISTS,
                         "cannot rename '%s' to '%s': that name is taken", from, to);
    const char *nm = cge__ir_arena_strdup(&g->arena, to);
    if (!nm || !cge__strmap_put(&g->value_map, nm, id))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "out of memory renaming '%s'", from);
    cge__strmap_put(&g->value_map, g->values[id].name, -1);   /* key exists: cannot fail */
    g->values[id].name = nm;
    if (g->values[id].kind == CGE_IR_VALUE_CONST)
        g->consts[g->values[id].def]->t.name = nm;
    return CGE_OK;
}
