/* optimize/cse: common-subexpression elimination. Identical small constants
 * are merged first; then a node with the same op, inputs and attributes as an
 * earlier one is replaced by it. */
#include <stdlib.h>
#include <string.h>

#include "base/strmap.h"
#include "base/strings.h"
#include "compiler/compiler_internal.h"

/* Nodes are visited in topological order, and a replaced node's uses read the
 * earlier node's outputs, so whole duplicated chains go in one sweep. */

#define CONST_CSE_MAX_BYTES 65536

typedef struct table {
    void **items;
    uint64_t *hashes;
    size_t cap;
} table;

static bool table_init(table *t, size_t n)
{
    t->cap = 64;
    while (t->cap < n * 2)
        t->cap *= 2;
    t->items = calloc(t->cap, sizeof(void *));
    t->hashes = calloc(t->cap, sizeof(uint64_t));
    return t->items && t->hashes;
}

static void table_free(table *t)
{
    free(t->items);
    free(t->hashes);
}

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static bool same_node(const cge_node *a, const cge_node *b)
{
    if (strcmp(cge_node_op_type(a), cge_node_op_type(b)) ||
        strcmp(cge_node_domain(a), cge_node_domain(b)) ||
        cge_node_num_inputs(a) != cge_node_num_inputs(b) ||
        cge_node_num_outputs(a) != cge_node_num_outputs(b))
        return false;
    for (int32_t i = 0; i < cge_node_num_inputs(a); i++)
        if (cge_node_input_id(a, i) != cge_node_input_id(b, i))
            return false;
    return cc_attrs_equal(cge_node_attrs_const(a), cge_node_attrs_const(b));
}

static uint64_t node_hash(const cge_node *n)
{
    uint64_t h = cge__str_hash(cge_node_op_type(n)) ^ (cge__str_hash(cge_node_domain(n)) << 1);
    for (int32_t i = 0; i < cge_node_num_inputs(n); i++)
        h = (h ^ (uint64_t)(int64_t)cge_node_input_id(n, i)) * 1099511628211ull;
    return h ^ cc_attrs_hash(cge_node_attrs_const(n)) ^ (uint64_t)cge_node_num_outputs(n) << 56;
}

/* A string constant's elements are addresses (cge/types.h): what two
 * constants share is their strings' bytes. */
static uint64_t hash_const(const cge_tensor *c, uint64_t h)
{
    if (c->dtype != CGE_STRING)
        return hash_bytes(c->data, c->bytes, h);
    const cge_string *e = c->data;
    for (size_t i = 0; i < c->bytes / sizeof *e; i++)
        h = hash_bytes(e[i].data, (size_t)e[i].size, h ^ (uint64_t)e[i].size);
    return h;
}

static bool same_const(const cge_tensor *a, const cge_tensor *b)
{
    if (a->dtype != b->dtype || !cge_shape_equal(&a->shape, &b->shape) || a->bytes != b->bytes)
        return false;
    if (a->dtype != CGE_STRING)
        return !memcmp(a->data, b->data, a->bytes);
    const cge_string *x = a->data, *y = b->data;
    for (size_t i = 0; i < a->bytes / sizeof *x; i++)
        if (!cge__string_equal(&x[i], &y[i]))
            return false;
    return true;
}

static cge_status merge_constants(cc_ctx *ctx, cc_uses *u, cge_graph *g)
{
    int32_t nc = cge_graph_num_constants(g);
    table t;
    if (!table_init(&t, (size_t)nc)) {
        table_free(&t);
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "cse: out of memory");
    }
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < nc; i++) {
        const char *name = cge_graph_constant_name(g, i);
        int32_t id = cge_graph_value_id(g, name);
        const cge_tensor *c = cge_graph_constant(g, name);
        if (!c || c->bytes > CONST_CSE_MAX_BYTES || cge_graph_value_is_output(g, id))
            continue;
        uint64_t h = hash_const(c, (uint64_t)c->dtype * 31 + (uint64_t)c->shape.rank);
        for (int32_t d = 0; d < c->shape.rank; d++)
            h = h * 131 + (uint64_t)c->shape.dims[d];
        size_t j = h & (t.cap - 1);
        for (; t.items[j]; j = (j + 1) & (t.cap - 1)) {
            if (t.hashes[j] == h && same_const(t.items[j], c))
                break;
        }
        if (!t.items[j]) {
            t.items[j] = (void *)c;
            t.hashes[j] = h;
            continue;
        }
        const cge_tensor *keep = t.items[j];
        st = cc_redirect(u, g, id, cge_graph_value_id(g, keep->name));
        if (!st) {
            st = cge_graph_remove_constant(g, name);
            ctx->removed++;
        }
    }
    table_free(&t);
    return st;
}

static cge_status replace_node(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *dup,
                               const cge_node *keep)
{
    int32_t no = cge_node_num_outputs(dup);
    bool any_output = false;
    for (int32_t o = 0; o < no; o++)
        any_output |= cge_graph_value_is_output(g, cge_node_output_id(dup, o));
    if (any_output) {
        bool done = false;
        if (no == 1)
            return cc_bypass(ctx, u, g, dup, 0, cge_node_output_id(keep, 0), &done);
        return CGE_OK;
    }
    cge_status st = CGE_OK;
    for (int32_t o = 0; !st && o < no; o++)
        st = cc_redirect(u, g, cge_node_output_id(dup, o), cge_node_output_id(keep, o));
    if (!st) {
        st = cge_graph_remove_node(g, dup);
        ctx->removed++;
    }
    return st;
}

cge_status cc_pass_cse(cc_ctx *ctx, cge_graph *g)
{
    int32_t nn = cge_graph_num_nodes(g);
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(nn ? nn : 1));
    table t = {0};
    if (!st && (!order || !table_init(&t, (size_t)nn)))
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "cse: out of memory");
    if (!st)
        st = merge_constants(ctx, &u, g);
    if (!st)
        st = cge_graph_topo_order(g, order);
    for (int32_t k = 0; !st && k < nn; k++) {
        cge_node *n = cge_graph_node(g, order[k]);
        if (cge_node_is_removed(n) || cc_is_nondeterministic(n) || cge_node_num_outputs(n) == 0)
            continue;
        uint64_t h = node_hash(n);
        size_t j = h & (t.cap - 1);
        for (; t.items[j]; j = (j + 1) & (t.cap - 1))
            if (t.hashes[j] == h && same_node(t.items[j], n))
                break;
        if (!t.items[j]) {
            t.items[j] = n;
            t.hashes[j] = h;
            continue;
        }
        st = replace_node(ctx, &u, g, n, t.items[j]);
    }
    table_free(&t);
    free(order);
    cc_uses_free(&u);
    return st;
}
