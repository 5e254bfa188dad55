/* Graph dumps: Graphviz DOT (names escaped, so any name gives a valid file)
 * and a one-line-per-node text listing for logs and pass dumps. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph_internal.h"

/* ---- DOT ------------------------------------------------------------------- */

/* Body of a DOT double-quoted string: quotes and backslashes escaped,
 * newlines as the label line break, other control characters as spaces. */
static void dot_esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c < 0x20 || c == 0x7f) {
            fputc(' ', f);
        } else {
            fputc(c, f);
        }
    }
}

/* "float32 [8,2048]" ("[batch,16]" with symbols named) when the dtype is
 * known, else ""; "sequence<float32 [?,4]>" and the like for non-tensors. */
static const char *desc_str(const cge_graph *g, const cge__ir_value *v, char *buf, size_t size)
{
    buf[0] = '\0';
    if (v->dtype == CGE_DTYPE_UNDEFINED)
        return buf;
    char shp[CGE_SHAPE_STR_MAX];
    if (v->vtype != CGE_TYPE_TENSOR)
        snprintf(buf, size, "%s<%s %s>", cge_value_type_name((cge_value_type)v->vtype),
                 cge_dtype_name(v->dtype), cge_graph_shape_str(g, &v->shape, shp, sizeof shp));
    else
        snprintf(buf, size, "%s %s", cge_dtype_name(v->dtype),
                 cge_graph_shape_str(g, &v->shape, shp, sizeof shp));
    return buf;
}

/* Value endpoints that are not nodes: inputs, constants, undefined names. */
static void dot_value_node(FILE *f, const cge_graph *g, int32_t vi, const cge__ir_value *v)
{
    char d[CGE_SHAPE_STR_MAX + 32];
    const char *shape = "ellipse", *style = "";
    if (v->kind == CGE_IR_VALUE_CONST)
        shape = "note";
    else if (v->kind == CGE_IR_VALUE_REF)
        style = ", style=dashed";
    fprintf(f, "  v%" PRId32 " [shape=%s%s, label=\"", vi, shape, style);
    dot_esc(f, v->name);
    desc_str(g, v, d, sizeof d);
    if (d[0])
        fprintf(f, "\\n%s", d);
    if (v->kind == CGE_IR_VALUE_REF)
        fputs("\\n(undefined)", f);
    fputs("\"];\n", f);
}

static void dot_ref_node(FILE *f, const cge_graph *g, int32_t vi, unsigned char *drawn)
{
    if (g->values[vi].kind == CGE_IR_VALUE_REF && !drawn[vi]) {
        drawn[vi] = 1;
        dot_value_node(f, g, vi, &g->values[vi]);
    }
}

static void dot_source(FILE *f, const cge__ir_value *v, int32_t vi)
{
    if (v->kind == CGE_IR_VALUE_NODE)
        fprintf(f, "  n%" PRId32, v->def);
    else
        fprintf(f, "  v%" PRId32, vi);
}

static void dot_edge_label(FILE *f, const cge_graph *g, const cge__ir_value *v)
{
    char d[CGE_SHAPE_STR_MAX + 32];
    fputs(" [label=\"", f);
    dot_esc(f, v->name);
    desc_str(g, v, d, sizeof d);
    if (d[0])
        fprintf(f, "\\n%s", d);
    fputs("\"]", f);
}

static cge_status io_result(const cge_graph *g, FILE *f, const char *what)
{
    if (ferror(f))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_IO, "writing %s of graph '%s' failed", what,
                         g->name);
    return CGE_OK;
}

cge_status cge_graph_write_dot(const cge_graph *g, FILE *f)
{
    if (!g || !f)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "cge_graph_write_dot: graph or file is NULL");
    /* Marks undefined names already drawn; allocated first so that running
     * out of memory leaves no half-written file. */
    unsigned char *drawn = calloc((size_t)g->num_values + 1, 1);
    if (!drawn)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY,
                         "out of memory writing DOT of graph '%s'", g->name);
    fputs("digraph \"", f);
    dot_esc(f, g->name);
    fputs("\" {\n  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n"
          "  edge [fontname=\"Helvetica\", fontsize=10];\n",
          f);
    for (int32_t i = 0; i < g->num_values; i++) {
        const cge__ir_value *v = &g->values[i];
        if (v->kind == CGE_IR_VALUE_INPUT || v->kind == CGE_IR_VALUE_CONST)
            dot_value_node(f, g, i, v);
    }
    for (int32_t i = 0; i < g->num_nodes; i++) {
        const cge_node *n = g->nodes[i];
        fprintf(f, "  n%" PRId32 " [shape=box, label=\"", i);
        if (n->domain[0]) {
            dot_esc(f, n->domain);
            fputs("::", f);
        }
        dot_esc(f, n->op_type);
        fputs("\\n", f);
        dot_esc(f, n->name);
        fputs("\"];\n", f);
    }
    /* Undefined names read by nodes or listed as outputs are drawn dashed,
     * so that a broken graph still draws and shows what is missing; names
     * left over by failed calls, which nothing refers to, are not drawn. */
    for (int32_t i = 0; i < g->num_nodes; i++) {
        const cge_node *n = g->nodes[i];
        for (int32_t k = 0; k < n->num_inputs; k++)
            if (n->inputs[k] >= 0)
                dot_ref_node(f, g, n->inputs[k], drawn);
    }
    for (int32_t i = 0; i < g->num_outputs; i++)
        dot_ref_node(f, g, g->outputs[i], drawn);
    free(drawn);
    for (int32_t i = 0; i < g->num_nodes; i++) {
        const cge_node *n = g->nodes[i];
        for (int32_t k = 0; k < n->num_inputs; k++) {
            int32_t vi = n->inputs[k];
            if (vi < 0)
                continue;
            const cge__ir_value *v = &g->values[vi];
            dot_source(f, v, vi);
            fprintf(f, " -> n%" PRId32, i);
            dot_edge_label(f, g, v);
            fputs(";\n", f);
        }
    }
    for (int32_t i = 0; i < g->num_outputs; i++) {
        int32_t vi = g->outputs[i];
        const cge__ir_value *v = &g->values[vi];
        fprintf(f, "  o%" PRId32 " [shape=ellipse, style=bold, label=\"", i);
        dot_esc(f, v->name);
        fputs("\"];\n", f);
        dot_source(f, v, vi);
        fprintf(f, " -> o%" PRId32, i);
        dot_edge_label(f, g, v);
        fputs(";\n", f);
    }
    fputs("}\n", f);
    return io_result(g, f, "DOT");
}

/* ---- text ----------------------------------------------------------------- */

static void text_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Names go out as they are unless that would break the one-line-per-node
 * layout (control characters) or hide them (empty): then quoted. */
static void text_name(FILE *f, const char *s)
{
    bool plain = s[0] != '\0';
    for (const char *p = s; *p && plain; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            plain = false;
    if (plain)
        fputs(s, f);
    else
        text_str(f, s);
}

static void text_tensor(FILE *f, const cge_tensor *t)
{
    char shp[CGE_SHAPE_STR_MAX];
    fprintf(f, "tensor(%s %s)", cge_dtype_name(t->dtype),
            cge_shape_str(&t->shape, shp, sizeof shp));
}

static void text_graph(FILE *f, const cge_graph *g)
{
    fputs("graph(", f);
    text_str(f, g->name);
    fprintf(f, ", %" PRId32 " nodes)", g->num_nodes);
}

/* Long lists are cut: the listing is for people, not for parsing back. */
#define TEXT_LIST_MAX 16

static void text_attr(FILE *f, const cge_attr *a)
{
    text_name(f, a->name);
    fputc('=', f);
    if (a->kind >= CGE_ATTR_FLOATS)
        fputc('[', f);
    int64_t shown = a->n < TEXT_LIST_MAX ? a->n : TEXT_LIST_MAX;
    switch (a->kind) {
    case CGE_ATTR_INT: fprintf(f, "%" PRId64, a->i); break;
    case CGE_ATTR_FLOAT: fprintf(f, "%g", (double)a->f); break;
    case CGE_ATTR_STRING: text_str(f, a->s); break;
    case CGE_ATTR_TENSOR: text_tensor(f, a->t); break;
    case CGE_ATTR_GRAPH: text_graph(f, a->g); break;
    case CGE_ATTR_FLOATS:
        for (int64_t i = 0; i < shown; i++)
            fprintf(f, "%s%g", i ? ", " : "", (double)a->floats[i]);
        break;
    case CGE_ATTR_INTS:
        for (int64_t i = 0; i < shown; i++)
            fprintf(f, "%s%" PRId64, i ? ", " : "", a->ints[i]);
        break;
    case CGE_ATTR_STRINGS:
        for (int64_t i = 0; i < shown; i++) {
            fputs(i ? ", " : "", f);
            text_str(f, a->strings[i]);
        }
        break;
    case CGE_ATTR_TENSORS:
        for (int64_t i = 0; i < shown; i++) {
            fputs(i ? ", " : "", f);
            text_tensor(f, &a->tensors[i]);
        }
        break;
    case CGE_ATTR_GRAPHS:
        for (int64_t i = 0; i < shown; i++) {
            fputs(i ? ", " : "", f);
            text_graph(f, a->graphs[i]);
        }
        break;
    default: fputs("?", f); break;
    }
    if (a->kind >= CGE_ATTR_FLOATS) {
        if (a->n > shown)
            fprintf(f, ", ... (%" PRId64 " items)", a->n);
        fputc(']', f);
    }
}

static void text_value(FILE *f, const cge_graph *g, const char *what, const cge__ir_value *v)
{
    char d[CGE_SHAPE_STR_MAX + 32];
    desc_str(g, v, d, sizeof d);
    fprintf(f, "%s ", what);
    text_name(f, v->name);
    fprintf(f, ": %s\n", d[0] ? d : "?");
}

cge_status cge_graph_write_text(const cge_graph *g, FILE *f)
{
    if (!g || !f)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "cge_graph_write_text: graph or file is NULL");
    fputs("graph ", f);
    text_name(f, g->name);
    fprintf(f, " (%" PRId32 " inputs, %" PRId32 " outputs, %" PRId32 " constants, %" PRId32
               " nodes)\n",
            g->num_inputs, g->num_outputs, g->num_consts, g->num_nodes);
    for (int32_t i = 0; i < g->num_inputs; i++)
        text_value(f, g, "input", &g->values[g->inputs[i]]);
    for (int32_t i = 0; i < g->num_consts; i++)
        text_value(f, g, "const", &g->values[g->consts[i]->value]);
    for (int32_t i = 0; i < g->num_nodes; i++) {
        const cge_node *n = g->nodes[i];
        text_name(f, n->name);
        fputs(" = ", f);
        if (n->domain[0]) {
            text_name(f, n->domain);
            fputs("::", f);
        }
        text_name(f, n->op_type);
        fputc('(', f);
        for (int32_t k = 0; k < n->num_inputs; k++) {
            fputs(k ? ", " : "", f);
            if (n->inputs[k] < 0)
                fputs("<absent>", f);
            else
                text_name(f, g->values[n->inputs[k]].name);
        }
        fputs(") ->", f);
        for (int32_t k = 0; k < n->num_outputs; k++) {
            fputs(k ? ", " : " ", f);
            text_name(f, g->values[n->outputs[k]].name);
        }
        if (n->attrs.count) {
            fputs(" {", f);
            for (int32_t k = 0; k < n->attrs.count; k++) {
                fputs(k ? ", " : "", f);
                text_attr(f, &n->attrs.items[k]);
            }
            fputc('}', f);
        }
        fputc('\n', f);
    }
    for (int32_t i = 0; i < g->num_outputs; i++)
        text_value(f, g, "output", &g->values[g->outputs[i]]);
    return io_result(g, f, "text");
}
