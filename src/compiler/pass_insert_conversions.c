/* partition/insert_conversions: where a value crosses from one engine to
 * another, insert a cge Reorder (formats differ) and/or a cge Copy (memory
 * spaces differ), once per value and destination. */
#include <stdlib.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

/* Graph outputs are brought back to plain format in memory space 0. Nothing is
 * inserted inside a subgraph of one engine. */

typedef struct conv_entry {
    int32_t value, format, space, result;
} conv_entry;

typedef struct conv_cache {
    conv_entry *items;
    int32_t n, cap;
} conv_cache;

static void value_place(const cc_ctx *ctx, const cge_graph *g, int32_t id, int32_t *format,
                        int32_t *space)
{
    cge_tensor_desc d;
    cge_graph_value_desc(g, id, &d);
    cge_node *p = cge_graph_value_producer(g, id);
    *format = d.format;
    *space = p ? ctx->node_space[cge_node_index(p)] : 0;
}

/* Add one conversion node reading `src`; its output is `out` (NULL: fresh).
 * `prefer` is the engine tried first for its kernel. */
static cge_status add_conversion(cc_ctx *ctx, cge_graph *g, const char *op, int32_t src,
                                 int32_t from_fmt, int32_t to_fmt, int32_t to_space, int32_t prefer,
                                 const char *out, int32_t *result)
{
    char vname[256], nname[256];
    const char *in = cge_graph_value_name(g, src);
    cge_tensor_desc d;
    cge_graph_value_desc(g, src, &d);
    if (!out)
        out = cc_fresh_name(ctx, g, in, vname, sizeof vname);
    cc_fresh_name(ctx, g, op, nname, sizeof nname);
    cge_node *n = NULL;
    cge_status st = cge_graph_add_node(g, op, CGE_DOMAIN_CONVERSION, nname, &in, 1, &out, 1, &n);
    if (!st && !strcmp(op, "Reorder")) {
        st = cge_node_set_int(n, "from", from_fmt);
        if (!st)
            st = cge_node_set_int(n, "to", to_fmt);
    }
    if (!st)
        st = cge_graph_set_desc(g, out, d.dtype, &d.shape);
    if (!st)
        st = cge_graph_set_format(g, out, (cge_format)to_fmt);
    if (!st)
        st = cc_assign_node(ctx, g, cge_node_index(n), prefer);
    if (!st) {
        /* The conversion's result lives where the destination wants it. */
        ctx->node_space[cge_node_index(n)] = to_space;
        *result = cge_graph_value_id(g, out);
        ctx->num_conversions++;
        ctx->added++;
    }
    return st;
}

/* src converted to (format, space); `out` names the final value or NULL. */
static cge_status convert(cc_ctx *ctx, cge_graph *g, int32_t src, int32_t format, int32_t space,
                          int32_t dst_engine, const char *out, int32_t *result)
{
    int32_t f, s;
    value_place(ctx, g, src, &f, &s);
    cge_node *p = cge_graph_value_producer(g, src);
    int32_t src_engine = p ? ctx->node_engine[cge_node_index(p)] : -1;
    cge_status st = CGE_OK;
    int32_t cur = src;
    if (f != format) {
        /* A blocked layout is known to its own engine: it reorders. */
        int32_t prefer = format != CGE_FORMAT_PLAIN ? dst_engine : src_engine;
        st = add_conversion(ctx, g, "Reorder", cur, f, format, s, prefer, s == space ? out : NULL, &cur);
    }
    if (!st && s != space)
        st = add_conversion(ctx, g, "Copy", cur, format, format, space, dst_engine, out, &cur);
    *result = cur;
    return st;
}

static cge_status cached(cc_ctx *ctx, cge_graph *g, conv_cache *c, int32_t src, int32_t format,
                         int32_t space, int32_t dst_engine, int32_t *result)
{
    for (int32_t i = 0; i < c->n; i++)
        if (c->items[i].value == src && c->items[i].format == format && c->items[i].space == space) {
            *result = c->items[i].result;
            return CGE_OK;
        }
    cge_status st = convert(ctx, g, src, format, space, dst_engine, NULL, result);
    if (st)
        return st;
    if (c->n == c->cap) {
        int32_t nc = c->cap ? c->cap * 2 : 16;
        conv_entry *p = realloc(c->items, sizeof *p * (size_t)nc);
        if (!p)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "partition: out of memory");
        c->items = p;
        c->cap = nc;
    }
    c->items[c->n++] = (conv_entry){src, format, space, *result};
    return CGE_OK;
}

cge_status cc_pass_insert_conversions(cc_ctx *ctx, cge_graph *g)
{
    int32_t nn = cge_graph_num_nodes(g);
    cge_status st = CGE_OK;
    conv_cache cache = {0};
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        const cge_engine_desc *e = &ctx->engines[ctx->node_engine[i]];
        for (int32_t k = 0; !st && k < cge_node_num_inputs(n); k++) {
            int32_t v = cge_node_input_id(n, k), f, s, r;
            if (v < 0)
                continue;
            value_place(ctx, g, v, &f, &s);
            if (f == (int32_t)e->format && s == e->memory_space)
                continue;
            st = cached(ctx, g, &cache, v, e->format, e->memory_space, ctx->node_engine[i], &r);
            if (!st)
                st = cge_node_set_input(n, k, cge_graph_value_name(g, r));
        }
    }
    /* Graph outputs leave in plain format, memory space 0. */
    for (int32_t i = 0; !st && i < cge_graph_num_outputs(g); i++) {
        int32_t y = cge_graph_value_id(g, cge_graph_output(g, i)), f, s, r;
        cge_node *p = cge_graph_value_producer(g, y);
        if (!p)
            continue;
        value_place(ctx, g, y, &f, &s);
        if (f == CGE_FORMAT_PLAIN && s == 0)
            continue;
        char fresh[256];
        int32_t slot = 0;
        while (cge_node_output_id(p, slot) != y)
            slot++;
        const char *yname = cge_graph_value_name(g, y);
        cc_fresh_name(ctx, g, yname, fresh, sizeof fresh);
        st = cge_node_set_output(p, slot, fresh);
        if (!st)
            st = cge_graph_replace_uses(g, yname, fresh);
        if (!st)
            st = convert(ctx, g, cge_graph_value_id(g, fresh), CGE_FORMAT_PLAIN, 0, -1, yname, &r);
    }
    free(cache.items);
    return st;
}
