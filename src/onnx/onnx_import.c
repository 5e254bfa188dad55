/* ModelProto -> cge_graph: opsets, initializers, typed inputs, nodes mapped
 * through the registry's converters, nested graphs as graph attributes, and
 * the import entry points. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "ir/constant_block.h"
#include "onnx/onnx_internal.h"
#include "cge/op.h"

/* Nodes are mapped with attribute-to-input promotion for older opsets,
 * Constant nodes are folded into constants, and value_info becomes
 * descriptors. */

static const cge_onnx_options no_options;

static const char *norm_domain(const char *d)
{
    if (!d || !strcmp(d, "ai.onnx"))
        return "";
    return d;
}

static const char *domain_label(const char *d) { return d[0] ? d : "ai.onnx"; }

static char *dup_bytes(const void *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        if (n)
            memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

static cge_status oom(void) { return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "onnx import: out of memory"); }

/* Structural errors of the IR while building from a file mean the file is
 * malformed (a value produced twice, a name reused): report them as [io]. */
static cge_status as_io(const onnx_ctx *cx, cge_status st, const char *where)
{
    if (st == CGE_OK || cge_last_error_layer() != CGE_LAYER_GRAPH)
        return st;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", cge_last_error());
    const char *body = strncmp(msg, "[graph] ", 8) ? msg : msg + 8;
    return cge__onnx_io_error(cx, "%s: %s", where, body);
}

/* ---- types -------------------------------------------------------------- */

typedef struct value_type {
    cge_dtype dtype;
    bool has_shape;
    cge_shape shape;
    cge_value_type vtype;   /* a sequence's or optional's dtype and shape are its elements' */
} value_type;

/* A dim_param's size: the value cge_onnx_options.dim_values binds it to,
 * else the graph's symbol of that name (made on first use), so that every
 * "batch" of the graph is the same unknown size. An empty name is anonymous. */
static cge_status dim_param_value(const onnx_ctx *cx, cge_graph *g, const char *param,
                                  const char *what, int64_t *out)
{
    *out = CGE_DIM_DYNAMIC;
    if (!param || !param[0])
        return CGE_OK;
    for (int32_t i = 0; i < cx->opts->num_dim_values; i++) {
        const cge_onnx_dim_value *d = &cx->opts->dim_values[i];
        if (d->dim_param && !strcmp(d->dim_param, param)) {
            *out = d->value;
            return CGE_OK;
        }
    }
    if (!g)
        return CGE_OK;
    *out = cge_graph_dim_symbol(g, param);
    if (*out == CGE_DIM_DYNAMIC)
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: %s: no symbol for dim_param '%s'",
                         cx->label, what, param);
    return CGE_OK;
}

/* `g`: the graph that names the dim_params' symbols. */
static cge_status parse_type(const onnx_ctx *cx, cge_graph *g, const Onnx__TypeProto *tp,
                             const char *what, value_type *out)
{
    memset(out, 0, sizeof *out);
    if (!tp)
        return CGE_OK;
    switch (tp->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE: break;
    case ONNX__TYPE_PROTO__VALUE__NOT_SET: return CGE_OK;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: {
        /* sequence(tensor), optional(tensor), optional(sequence(tensor)):
         * the IR's value types, described by their elements. */
        bool seq = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
        const Onnx__TypeProto *et = seq ? (tp->sequence_type ? tp->sequence_type->elem_type : NULL)
                                        : (tp->optional_type ? tp->optional_type->elem_type : NULL);
        cge_status st = et ? parse_type(cx, NULL, et, what, out) : CGE_OK;
        if (st)
            return st;
        if (seq && out->vtype != CGE_TYPE_TENSOR)
            return cge__onnx_unsupported(cx, "%s: sequences of sequences or optionals are not "
                                            "supported", what);
        /* A sequence copies its elements' bytes: string elements would be
         * addresses into memory the sequence does not own (docs/strings.md). */
        if (out->dtype == CGE_STRING)
            return cge__onnx_unsupported(cx, "%s: sequences and optionals of strings are not "
                                            "supported", what);
        if (!seq && out->vtype != CGE_TYPE_TENSOR && out->vtype != CGE_TYPE_SEQUENCE)
            return cge__onnx_unsupported(cx, "%s: optionals of optionals are not supported",
                                        what);
        out->vtype = seq ? CGE_TYPE_SEQUENCE
                         : out->vtype == CGE_TYPE_SEQUENCE ? CGE_TYPE_OPTIONAL_SEQUENCE
                                                           : CGE_TYPE_OPTIONAL;
        /* Elements may differ in shape: dims stay unknown, unrelated
         * (no symbols: a run binds none from them); no shape is rank -1. */
        if (!out->has_shape)
            out->shape.rank = -1;
        for (int32_t d = 0; d < out->shape.rank; d++)
            if (out->shape.dims[d] < 0)
                out->shape.dims[d] = CGE_DIM_DYNAMIC;
        out->has_shape = true;
        return CGE_OK;
    }
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        return cge__onnx_unsupported(cx, "%s: map types are not supported", what);
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        return cge__onnx_unsupported(cx, "%s: sparse tensor types are not supported", what);
    default:
        return cge__onnx_unsupported(cx, "%s: unknown type kind %d", what, (int)tp->value_case);
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!tt)
        return CGE_OK;
    if (tt->has_elem_type && tt->elem_type != 0) {
        cge_status st = cge__onnx_map_dtype(cx, tt->elem_type, what, &out->dtype);
        if (st)
            return st;
    }
    if (!tt->shape)
        return CGE_OK;
    if (tt->shape->n_dim > CGE_MAX_RANK)
        return cge__onnx_unsupported(cx, "%s: rank %zu is above cge's limit of %d", what,
                                    tt->shape->n_dim, CGE_MAX_RANK);
    out->has_shape = true;
    out->shape.rank = (int32_t)tt->shape->n_dim;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        int64_t v = CGE_DIM_DYNAMIC;
        if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0)
                return cge__onnx_io_error(cx, "%s: dimension %zu is negative (%lld)", what, i,
                                         (long long)d->dim_value);
            v = d->dim_value;
        } else if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) {
            cge_status st = dim_param_value(cx, g, d->dim_param, what, &v);
            if (st)
                return st;
        }
        out->shape.dims[i] = v;
    }
    return CGE_OK;
}

/* ---- graphs ------------------------------------------------------------- */

typedef struct graph_build {
    onnx_ctx *cx;
    const Onnx__GraphProto *gp;
    int depth;
    cge_graph *dst;
    cge_graph *src;     /* scratch: ONNX nodes as cge nodes, for the converters */
} graph_build;

static cge_status import_graph(onnx_ctx *cx, const Onnx__GraphProto *gp, int depth, bool is_main,
                               cge_graph **out);

static bool node_name_taken(const graph_build *b, const char *name)
{
    return cge_graph_find_node(b->dst, name) || cge_graph_find_node(b->src, name);
}

/* ONNX node names may be empty or repeated; cge's are unique. */
static char *unique_node_name(const graph_build *b, const char *want, const char *op, size_t idx)
{
    char base[256];
    if (want && want[0])
        snprintf(base, sizeof base, "%s", want);
    else
        snprintf(base, sizeof base, "%s_%zu", op, idx);
    char *name = dup_bytes(base, strlen(base));
    for (int k = 1; name && node_name_taken(b, name) && k < 1000000; k++) {
        free(name);
        char buf[300];
        snprintf(buf, sizeof buf, "%s_%d", base, k);
        name = dup_bytes(buf, strlen(buf));
    }
    return name;
}

static bool value_exists(const cge_graph *g, const char *name)
{
    cge_tensor_desc d;
    if (cge_graph_get_desc(g, name, &d) == CGE_OK)
        return true;
    cge_clear_error();
    return false;
}

/* A fresh value name derived from `base` in the destination graph. */
static char *unique_value_name(graph_build *b, const char *base)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", base);
    while (value_exists(b->dst, buf) || value_exists(b->src, buf))
        snprintf(buf, sizeof buf, "%s_%llu", base, (unsigned long long)++b->cx->uniq);
    return dup_bytes(buf, strlen(buf));
}

static cge_attr_kind attr_kind(const Onnx__AttributeProto *ap)
{
    if (ap->has_type && ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
        return (cge_attr_kind)ap->type;
    /* Very old writers left the type out: infer it from the field present. */
    if (ap->has_f) return CGE_ATTR_FLOAT;
    if (ap->has_i) return CGE_ATTR_INT;
    if (ap->has_s) return CGE_ATTR_STRING;
    if (ap->t) return CGE_ATTR_TENSOR;
    if (ap->g) return CGE_ATTR_GRAPH;
    if (ap->n_floats) return CGE_ATTR_FLOATS;
    if (ap->n_ints) return CGE_ATTR_INTS;
    if (ap->n_strings) return CGE_ATTR_STRINGS;
    if (ap->n_tensors) return CGE_ATTR_TENSORS;
    if (ap->n_graphs) return CGE_ATTR_GRAPHS;
    return CGE_ATTR_UNDEFINED;
}

/* Convert one attribute and store it in `attrs`. */
static cge_status set_attr(graph_build *b, const char *node, const Onnx__AttributeProto *ap,
                           cge_attrs *attrs)
{
    onnx_ctx *cx = b->cx;
    if (!ap || !ap->name || !ap->name[0])
        return cge__onnx_io_error(cx, "node '%s': an attribute has no name", node);
    char what[512];
    snprintf(what, sizeof what, "node '%s' attribute '%s'", node, ap->name);
    if (ap->ref_attr_name && ap->ref_attr_name[0])
        return cge__onnx_unsupported(cx, "%s: references a function attribute ('%s'); functions "
                                        "are not supported", what, ap->ref_attr_name);
    int raw_type = ap->has_type ? (int)ap->type : 0;
    if (raw_type == 13 && ap->tp) {
        /* A type (Optional's `type`): ints [cge_value_type, element dtype]. */
        value_type vt;
        cge_status st = parse_type(cx, NULL, ap->tp, what, &vt);
        int64_t v[2] = {(int64_t)vt.vtype, (int64_t)vt.dtype};
        return st ? st : cge_attrs_set(attrs, &CGE_ATTR_INTS(ap->name, v, 2));
    }
    if (raw_type >= 11 && raw_type <= 14)
        return cge__onnx_unsupported(cx, "%s: %s attributes are not supported", what,
                                    raw_type == 11 ? "sparse tensor"
                                    : raw_type == 12 ? "sparse tensor list"
                                    : raw_type == 13 ? "type proto"
                                                     : "type proto list");
    if (raw_type < 0 || raw_type > 14)
        return cge__onnx_io_error(cx, "%s: unknown attribute type %d", what, raw_type);
    cge_attr_kind kind = attr_kind(ap);
    cge_attr a = {.name = ap->name, .kind = kind};
    cge_status st = CGE_OK;
    switch (kind) {
    case CGE_ATTR_FLOAT: a.f = ap->f; return cge_attrs_set(attrs, &a);
    case CGE_ATTR_INT: a.i = ap->i; return cge_attrs_set(attrs, &a);
    case CGE_ATTR_FLOATS:
        a.floats = ap->floats;
        a.n = (int64_t)ap->n_floats;
        return cge_attrs_set(attrs, &a);
    case CGE_ATTR_INTS:
        a.ints = ap->ints;
        a.n = (int64_t)ap->n_ints;
        return cge_attrs_set(attrs, &a);
    case CGE_ATTR_STRING: {
        char *s = dup_bytes(ap->s.data, ap->s.len);
        if (!s)
            return oom();
        a.s = s;
        st = cge_attrs_set(attrs, &a);
        free(s);
        return st;
    }
    case CGE_ATTR_STRINGS: {
        char **v = calloc(ap->n_strings + 1, sizeof *v);
        if (!v)
            return oom();
        for (size_t i = 0; i < ap->n_strings && !st; i++)
            if (!(v[i] = dup_bytes(ap->strings[i].data, ap->strings[i].len)))
                st = oom();
        a.strings = (const char *const *)v;
        a.n = (int64_t)ap->n_strings;
        if (!st)
            st = cge_attrs_set(attrs, &a);
        for (size_t i = 0; i < ap->n_strings; i++)
            free(v[i]);
        free(v);
        return st;
    }
    case CGE_ATTR_TENSOR: {
        cge_tensor t;
        if (!ap->t)
            return cge__onnx_io_error(cx, "%s: tensor attribute without a tensor", what);
        st = cge__onnx_decode_tensor(cx, ap->t, what, &t);
        if (st)
            return st;
        a.t = &t;
        st = cge_attrs_set(attrs, &a);
        free(t.data);
        return st;
    }
    case CGE_ATTR_TENSORS: {
        cge_tensor *v = calloc(ap->n_tensors + 1, sizeof *v);
        if (!v)
            return oom();
        size_t done = 0;
        for (; done < ap->n_tensors && !st; done++)
            st = cge__onnx_decode_tensor(cx, ap->tensors[done], what, &v[done]);
        a.tensors = v;
        a.n = (int64_t)ap->n_tensors;
        if (!st)
            st = cge_attrs_set(attrs, &a);
        for (size_t i = 0; i < done; i++)
            free(v[i].data);
        free(v);
        return st;
    }
    case CGE_ATTR_GRAPH: {
        if (!ap->g)
            return cge__onnx_io_error(cx, "%s: graph attribute without a graph", what);
        cge_graph *sub = NULL;
        st = import_graph(cx, ap->g, b->depth + 1, false, &sub);
        if (st)
            return st;
        a.g = sub;
        st = cge_attrs_set(attrs, &a);
        cge_graph_destroy(sub);
        return st;
    }
    case CGE_ATTR_GRAPHS: {
        cge_graph **v = calloc(ap->n_graphs + 1, sizeof *v);
        if (!v)
            return oom();
        for (size_t i = 0; i < ap->n_graphs && !st; i++) {
            if (!ap->graphs[i])
                st = cge__onnx_io_error(cx, "%s: empty graph", what);
            else
                st = import_graph(cx, ap->graphs[i], b->depth + 1, false, &v[i]);
        }
        a.graphs = (const cge_graph *const *)v;
        a.n = (int64_t)ap->n_graphs;
        if (!st)
            st = cge_attrs_set(attrs, &a);
        for (size_t i = 0; i < ap->n_graphs; i++)
            cge_graph_destroy(v[i]);
        free(v);
        return st;
    }
    default:
        return cge__onnx_io_error(cx, "%s: attribute has no type and no value", what);
    }
}

/* A Constant node becomes a graph constant, so that meta sees its value
 * (Reshape's shape, Slice's starts, ...) when the graph is compiled. */
static cge_status import_constant(graph_build *b, const Onnx__NodeProto *np, const char *node)
{
    onnx_ctx *cx = b->cx;
    if (np->n_output != 1 || !np->output[0] || !np->output[0][0])
        return cge__onnx_io_error(cx, "Constant node '%s' must have exactly one named output",
                                 node);
    if (np->n_attribute != 1 || !np->attribute[0] || !np->attribute[0]->name)
        return cge__onnx_io_error(cx, "Constant node '%s' must have exactly one value attribute",
                                 node);
    const Onnx__AttributeProto *ap = np->attribute[0];
    char what[512];
    snprintf(what, sizeof what, "Constant node '%s'", node);
    cge_tensor t = {0};
    cge_status st = CGE_OK;
    const char *an = ap->name;
    if (!strcmp(an, "value")) {
        if (!ap->t)
            return cge__onnx_io_error(cx, "%s: 'value' holds no tensor", what);
        st = cge__onnx_decode_tensor(cx, ap->t, what, &t);
    } else if (!strcmp(an, "value_float") || !strcmp(an, "value_int")) {
        bool f = an[6] == 'f';
        t.dtype = f ? CGE_F32 : CGE_I64;
        t.bytes = f ? sizeof(float) : sizeof(int64_t);
        t.data = malloc(t.bytes);
        if (!t.data)
            return oom();
        if (f)
            memcpy(t.data, &ap->f, sizeof(float));
        else
            memcpy(t.data, &ap->i, sizeof(int64_t));
    } else if (!strcmp(an, "value_floats") || !strcmp(an, "value_ints")) {
        bool f = an[6] == 'f';
        size_t n = f ? ap->n_floats : ap->n_ints;
        t.dtype = f ? CGE_F32 : CGE_I64;
        t.shape.rank = 1;
        t.shape.dims[0] = (int64_t)n;
        t.bytes = n * (f ? sizeof(float) : sizeof(int64_t));
        t.data = malloc(t.bytes ? t.bytes : 1);
        if (!t.data)
            return oom();
        if (n)
            memcpy(t.data, f ? (const void *)ap->floats : (const void *)ap->ints, t.bytes);
    } else if (!strcmp(an, "value_string") || !strcmp(an, "value_strings")) {
        /* elements pointing into the model's bytes; the constant copies them */
        bool one = an[12] == '\0';
        size_t n = one ? 1 : ap->n_strings;
        t.dtype = CGE_STRING;
        t.shape.rank = one ? 0 : 1;
        t.shape.dims[0] = (int64_t)n;
        t.bytes = n * sizeof(cge_string);
        cge_string *e = malloc(t.bytes ? t.bytes : 1);
        if (!e)
            return oom();
        for (size_t i = 0; i < n; i++) {
            const ProtobufCBinaryData *b = one ? &ap->s : &ap->strings[i];
            e[i] = (cge_string){.data = (const char *)b->data, .size = (int64_t)b->len};
        }
        t.data = e;
    } else if (!strcmp(an, "sparse_value")) {
        return cge__onnx_unsupported(cx, "%s: sparse tensors are not supported", what);
    } else {
        return cge__onnx_io_error(cx, "%s: unknown attribute '%s'", what, an);
    }
    if (st)
        return st;
    st = cge_graph_add_constant(b->dst, np->output[0], t.dtype, &t.shape, t.data, t.bytes);
    free(t.data);
    return as_io(cx, st, what);
}

/* Older opsets carry as attributes what the current definition takes as an
 * input (axes, split, pads, starts, min/max, scales, k): when the target has
 * no such attribute but an input of that name, the attribute becomes a
 * constant feeding that input. */
static const char *input_alias(const char *op, const char *attr)
{
    if (!strcmp(op, "Pad") && !strcmp(attr, "value"))
        return "constant_value";
    if (!strcmp(op, "TopK") && !strcmp(attr, "k"))
        return "K";
    return attr;
}

/* Attributes of old opsets that changed nothing in inference (ignored when
 * the current definition no longer has them). */
static bool obsolete_attr(const Onnx__AttributeProto *ap)
{
    if (!strcmp(ap->name, "consumed_inputs") || !strcmp(ap->name, "is_test"))
        return true;
    /* BatchNormalization 7..8: spatial=1 is what later versions always do. */
    return !strcmp(ap->name, "spatial") && attr_kind(ap) == CGE_ATTR_INT && ap->i == 1;
}

static bool def_has_attr(const cge_op_def *def, const char *name)
{
    for (int32_t i = 0; i < def->num_attrs; i++)
        if (!strcmp(def->attrs[i].name, name))
            return true;
    return false;
}

static int32_t def_input_index(const cge_op_def *def, const char *name)
{
    for (int32_t i = 0; i < def->num_inputs; i++)
        if (!strcmp(def->inputs[i].name, name))
            return i;
    return -1;
}

static cge_status promoted_constant(graph_build *b, const char *node, const char *op,
                                    const Onnx__AttributeProto *ap, char **value_name)
{
    cge_attr_kind k = attr_kind(ap);
    cge_tensor t = {0};
    int64_t one_i;
    float one_f;
    switch (k) {
    case CGE_ATTR_INTS:
        t = (cge_tensor){.dtype = CGE_I64, .shape = CGE_SHAPE((int64_t)ap->n_ints),
                         .data = ap->ints, .bytes = ap->n_ints * sizeof(int64_t)};
        break;
    case CGE_ATTR_FLOATS:
        t = (cge_tensor){.dtype = CGE_F32, .shape = CGE_SHAPE((int64_t)ap->n_floats),
                         .data = ap->floats, .bytes = ap->n_floats * sizeof(float)};
        break;
    case CGE_ATTR_INT:
        /* TopK's K is a 1-element 1-D tensor; other int inputs are scalars. */
        one_i = ap->i;
        t = (cge_tensor){.dtype = CGE_I64, .data = &one_i, .bytes = sizeof one_i};
        if (!strcmp(op, "TopK"))
            t.shape = CGE_SHAPE(1);
        break;
    case CGE_ATTR_FLOAT:
        one_f = ap->f;
        t = (cge_tensor){.dtype = CGE_F32, .data = &one_f, .bytes = sizeof one_f};
        break;
    default:
        return cge__onnx_unsupported(b->cx, "node '%s': attribute '%s' (%s) cannot become an "
                                           "input of %s", node, ap->name,
                                    cge_attr_kind_name(k), op);
    }
    char base[512];
    snprintf(base, sizeof base, "%s/%s", node, ap->name);
    char *name = unique_value_name(b, base);
    if (!name)
        return oom();
    static const int64_t empty_dummy = 0;
    cge_status st = cge_graph_add_constant(b->dst, name, t.dtype, &t.shape,
                                           t.data ? t.data : &empty_dummy, t.bytes);
    if (st) {
        free(name);
        return st;
    }
    *value_name = name;
    return CGE_OK;
}

/* ---- outer-scope names of nested graphs ---------------------------------
 * An ONNX body (If, Loop, Scan) may read values of enclosing graphs by name.
 * The importer makes those reads explicit: every such name becomes an extra
 * input of the node that owns the body, appended after its ONNX inputs, and
 * the string list attribute "outer_names" names them as the body reads them,
 * so that the kernel can bind them even after passes rename outer values. */

typedef struct name_list {
    const char **v;
    size_t n, cap;
} name_list;

static bool name_list_has(const name_list *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s))
            return true;
    return false;
}

static bool name_list_add(name_list *l, const char *s)
{
    if (name_list_has(l, s))
        return true;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        const char **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return true;
}

static bool proto_graph_defines(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t i = 0; i < gp->n_input; i++)
        if (gp->input[i] && gp->input[i]->name && !strcmp(gp->input[i]->name, name))
            return true;
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i] && gp->initializer[i]->name &&
            !strcmp(gp->initializer[i]->name, name))
            return true;
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        for (size_t i = 0; np && i < np->n_output; i++)
            if (np->output[i] && !strcmp(np->output[i], name))
                return true;
    }
    return false;
}

static bool proto_outer_names(const Onnx__GraphProto *gp, int depth, name_list *out);

/* Outer names of the graphs in a node's attributes, added to `out`. */
static bool proto_node_outer_names(const Onnx__NodeProto *np, int depth, name_list *out)
{
    bool ok = true;
    for (size_t a = 0; ok && a < np->n_attribute; a++) {
        const Onnx__AttributeProto *ap = np->attribute[a];
        if (!ap)
            continue;
        if (ap->g)
            ok = proto_outer_names(ap->g, depth + 1, out);
        for (size_t i = 0; ok && i < ap->n_graphs; i++)
            if (ap->graphs[i])
                ok = proto_outer_names(ap->graphs[i], depth + 1, out);
    }
    return ok;
}

/* Names `gp` and its nested graphs read but do not define. Too deep a
 * nesting stops the walk: import_graph reports it. */
static bool proto_outer_names(const Onnx__GraphProto *gp, int depth, name_list *out)
{
    if (depth > CGE_ONNX_MAX_DEPTH)
        return true;
    name_list used = {0};
    bool ok = true;
    for (size_t k = 0; ok && k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        if (!np)
            continue;
        for (size_t i = 0; ok && i < np->n_input; i++)
            if (np->input[i] && np->input[i][0])
                ok = name_list_add(&used, np->input[i]);
        if (ok)
            ok = proto_node_outer_names(np, depth, &used);
    }
    for (size_t i = 0; ok && i < gp->n_output; i++)
        if (gp->output[i] && gp->output[i]->name && gp->output[i]->name[0])
            ok = name_list_add(&used, gp->output[i]->name);
    for (size_t i = 0; ok && i < used.n; i++)
        if (!proto_graph_defines(gp, used.v[i]))
            ok = name_list_add(out, used.v[i]);
    free(used.v);
    return ok;
}

/* The runtime and the memory planner take nodes of at most 64 inputs
 * (fixed-size tables); exporters write wider Concats (ssdlite's anchors:
 * one input per feature map and box). Such a Concat becomes a tree of
 * Concats of <= 64 inputs along the same axis (the same result). */
#define CONCAT_FAN_IN 64

static cge_status split_wide_concat(graph_build *b, const cge_node *src, const char *node)
{
    const cge_attrs *a = cge_node_attrs_const(src);
    int64_t axis = cge_attrs_get_int(a, "axis", 1);
    int32_t n = cge_node_num_inputs(src);
    const char **level = malloc((size_t)n * sizeof *level);
    char **tmp = calloc((size_t)n, sizeof *tmp);
    size_t n_tmp = 0;
    cge_status st = (!level || !tmp) ? oom() : CGE_OK;
    for (int32_t i = 0; !st && i < n; i++)
        level[i] = cge_node_input(src, i);
    int32_t width = n;
    for (int round = 0; !st && width > CONCAT_FAN_IN; round++) {
        int32_t next = 0;
        for (int32_t i = 0; !st && i < width; i += CONCAT_FAN_IN, next++) {
            int32_t k = width - i < CONCAT_FAN_IN ? width - i : CONCAT_FAN_IN;
            char base[512], nname[600];
            snprintf(base, sizeof base, "%s/part%d_%d", node, round, next);
            char *out = unique_value_name(b, base);
            if (!out) {
                st = oom();
                break;
            }
            tmp[n_tmp++] = out;
            snprintf(nname, sizeof nname, "%s/concat%d_%d", node, round, next);
            cge_node *part = NULL;
            const char *o = out;
            st = cge_graph_add_node(b->dst, "Concat", "", nname, level + i, k, &o, 1, &part);
            if (!st)
                st = cge_node_set_int(part, "axis", axis);
            level[next] = out;
        }
        width = next;
    }
    cge_node *last = NULL;
    const char *y = cge_node_output(src, 0);
    if (!st)
        st = cge_graph_add_node(b->dst, "Concat", "", node, level, width, &y, 1, &last);
    if (!st)
        st = cge_node_set_int(last, "axis", axis);
    for (size_t i = 0; i < n_tmp; i++)
        free(tmp[i]);
    free(tmp);
    free(level);
    return st;
}

static cge_status import_node(graph_build *b, const Onnx__NodeProto *np, size_t idx)
{
    onnx_ctx *cx = b->cx;
    if (!np)
        return cge__onnx_io_error(cx, "node %zu is empty", idx);
    const char *op = np->op_type;
    if (!op || !op[0])
        return cge__onnx_io_error(cx, "node %zu ('%s') has no op_type", idx,
                                 np->name ? np->name : "");
    const char *domain = norm_domain(np->domain);
    char *node = unique_node_name(b, np->name, op, idx);
    if (!node)
        return oom();
    cge_status st = CGE_OK;
    for (size_t i = 0; i < np->n_input && !st; i++)
        if (!np->input[i])
            st = cge__onnx_io_error(cx, "node '%s': input %zu is missing", node, i);
    for (size_t i = 0; i < np->n_output && !st; i++)
        if (!np->output[i])
            st = cge__onnx_io_error(cx, "node '%s': output %zu is missing", node, i);
    if (st || (!domain[0] && !strcmp(op, "Constant"))) {
        if (!st)
            st = import_constant(b, np, node);
        free(node);
        return st;
    }

    int64_t opset = -1;
    for (int32_t i = 0; i < cx->num_opsets; i++)
        if (!strcmp(cx->opsets[i].domain, domain))
            opset = cx->opsets[i].version;
    if (opset < 0) {
        /* As ONNX's checker: every domain a node uses must be imported. */
        st = cge__onnx_io_error(cx, "node '%s' (%s): the model imports no opset for domain '%s'",
                               node, op, domain_label(domain));
        free(node);
        return st;
    }

    const cge_converter_def *conv = cge_converter_find("onnx", domain, op, opset);
    if (!conv) {
        st = cge__onnx_unsupported(cx, "unsupported operator '%s' (domain '%s', opset %lld) in "
                                      "node '%s'", op, domain_label(domain), (long long)opset,
                                  node);
        free(node);
        return st;
    }

    /* Inputs and outputs as the converter will see them. */
    size_t n_in = np->n_input, cap_in = n_in + np->n_attribute + 8;
    const char **ins = calloc(cap_in, sizeof *ins);
    char **owned = calloc(np->n_attribute + np->n_output + 1, sizeof *owned);
    size_t n_owned = 0;
    size_t n_out = np->n_output;
    while (n_out > 0 && !np->output[n_out - 1][0])
        n_out--; /* trailing optional outputs left out */
    const char **outs = calloc(n_out + 1, sizeof *outs);
    bool *promoted = calloc(np->n_attribute + 1, sizeof *promoted);
    if (!ins || !owned || !outs || !promoted)
        st = oom();
    for (size_t i = 0; !st && i < n_in; i++)
        ins[i] = np->input[i];
    for (size_t i = 0; !st && i < n_out; i++) {
        outs[i] = np->output[i];
        if (!outs[i][0]) {
            char base[512];
            snprintf(base, sizeof base, "%s/unused_output_%zu", node, i);
            if (!(owned[n_owned] = unique_value_name(b, base)))
                st = oom();
            else
                outs[i] = owned[n_owned++];
        }
    }

    const cge_op_def *target = NULL;
    if (!st && !conv->convert) {
        target = cge_op_find(conv->target_domain, conv->target_op, 0);
        if (!target)
            cge_clear_error(); /* reported below, once the node is converted */
    }
    for (size_t a = 0; !st && target && a < np->n_attribute; a++) {
        const Onnx__AttributeProto *ap = np->attribute[a];
        if (!ap || !ap->name || def_has_attr(target, ap->name))
            continue;
        if (obsolete_attr(ap)) {
            promoted[a] = true;
            continue;
        }
        int32_t k = def_input_index(target, input_alias(target->name, ap->name));
        if (k < 0 || ((size_t)k < n_in && ins[k][0]))
            continue;
        char *vname = NULL;
        st = promoted_constant(b, node, target->name, ap, &vname);
        if (st)
            break;
        owned[n_owned++] = vname;
        while (n_in < (size_t)k)
            ins[n_in++] = "";
        if ((size_t)k == n_in)
            n_in++;
        ins[k] = vname;
        promoted[a] = true;
    }

    name_list outer = {0};
    if (!st && !proto_node_outer_names(np, b->depth, &outer))
        st = oom();
    if (!st && outer.n) {
        const char **grown = realloc(ins, (n_in + outer.n + 1) * sizeof *ins);
        if (!grown)
            st = oom();
        else
            ins = grown;
        for (size_t i = 0; !st && i < outer.n; i++)
            ins[n_in + i] = outer.v[i];
    }
    cge_node *src = NULL;
    if (!st)
        st = as_io(cx, cge_graph_add_node(b->src, op, domain, node, ins, (int32_t)(n_in + outer.n),
                                          outs, (int32_t)n_out, &src), node);
    for (size_t a = 0; !st && a < np->n_attribute; a++)
        if (!promoted[a])
            st = set_attr(b, node, np->attribute[a], cge_node_attrs(src));
    if (!st) /* a 4-bit zero point's type, lost once unpacked (onnx_opset21.c) */
        st = as_io(cx, cge__onnx_note_4bit_output(b->gp, np, opset, src), node);
    if (!st && outer.n) {
        cge_attr names = {.name = "outer_names", .kind = CGE_ATTR_STRINGS,
                          .strings = outer.v, .n = (int64_t)outer.n};
        st = as_io(cx, cge_attrs_set(cge_node_attrs(src), &names), node);
    }
    free(outer.v);
    int32_t before = cge_graph_num_nodes(b->dst);
    if (!st && !domain[0] && !strcmp(op, "Concat") && opset >= 4 && n_in > CONCAT_FAN_IN &&
        n_out == 1)
        st = as_io(cx, split_wide_concat(b, src, node), node);
    else if (!st)
        st = as_io(cx, cge_converter_apply(conv, src, opset, b->dst), node);
    for (int32_t k = before; !st && k < cge_graph_num_nodes(b->dst); k++) {
        const cge_node *n = cge_graph_node(b->dst, k);
        if (!cge_op_find(cge_node_domain(n), cge_node_op_type(n), 0)) {
            cge_clear_error();
            st = cge__onnx_unsupported(cx, "unsupported operator '%s' (domain '%s', opset %lld) "
                                          "in node '%s': it maps onto '%s', which has no "
                                          "definition in this build", op, domain_label(domain),
                                      (long long)opset, node, cge_node_op_type(n));
        }
    }
    for (size_t i = 0; i < n_owned; i++)
        free(owned[i]);
    free(owned);
    free(ins);
    free(outs);
    free(promoted);
    free(node);
    return st;
}

/* A main-graph input dim with neither dim_value nor dim_param gets a symbol
 * of its own, "unk__<input>_<axis>" (ONNX Runtime's prefix for the dims it
 * names), so that a symbolic plan serves it like a named one: an anonymous
 * -1 cannot be proved equal to anything, which sends a graph to a compile
 * per signature. The name is fresh: where the graph already has it (a
 * dim_param spelt so), a suffix makes another. The Python API shows these
 * as None, as ONNX Runtime does. */
static cge_status anonymous_dim(const onnx_ctx *cx, cge_graph *g, const char *input, int32_t axis,
                                const char *what, int64_t *out)
{
    char name[600];
    for (int n = 0; n < 1000; n++) {
        if (n)
            snprintf(name, sizeof name, "unk__%s_%d#%d", input, (int)axis, n);
        else
            snprintf(name, sizeof name, "unk__%s_%d", input, (int)axis);
        int32_t before = cge_graph_num_dim_symbols(g);
        int64_t d = cge_graph_dim_symbol(g, name);
        if (d == CGE_DIM_DYNAMIC)
            return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: %s: no symbol for dim %d",
                             cx->label, what, (int)axis);
        if (cge_graph_num_dim_symbols(g) > before) {
            *out = d;
            return CGE_OK;
        }
    }
    return CGE_OK;   /* stays anonymous */
}

static cge_status add_inputs(graph_build *b, bool is_main)
{
    onnx_ctx *cx = b->cx;
    const Onnx__GraphProto *gp = b->gp;
    cge_status st = CGE_OK;
    for (size_t i = 0; i < gp->n_input && !st; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi || !vi->name || !vi->name[0])
            return cge__onnx_io_error(cx, "graph input %zu has no name", i);
        /* Old models list initializers among the inputs: they stay constants. */
        if (cge_graph_constant(b->dst, vi->name))
            continue;
        char what[512];
        snprintf(what, sizeof what, "graph input '%s'", vi->name);
        value_type vt;
        st = parse_type(cx, b->dst, vi->type, what, &vt);
        if (st)
            return st;
        const cge_onnx_input_shape *ov = NULL;
        for (int32_t k = 0; is_main && k < cx->opts->num_input_shapes; k++)
            if (cx->opts->input_shapes[k].name && !strcmp(cx->opts->input_shapes[k].name, vi->name))
                ov = &cx->opts->input_shapes[k];
        if (ov) {
            if (ov->shape.rank < 0 || ov->shape.rank > CGE_MAX_RANK)
                return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG,
                                 "%s: input_shapes gives %s rank %d", cx->label, what,
                                 (int)ov->shape.rank);
            vt.shape = ov->shape;
            vt.has_shape = true;
        }
        if (is_main && vt.dtype == CGE_DTYPE_UNDEFINED)
            return cge__onnx_io_error(cx, "%s declares no element type", what);
        if (vt.vtype != CGE_TYPE_TENSOR) {
            /* A sequence or optional: added as a tensor, then typed (its
             * element shape may be of unknown rank). */
            cge_shape sc = CGE_SCALAR;
            st = as_io(cx, cge_graph_add_input(b->dst, vi->name, vt.dtype, &sc), what);
            if (!st)
                st = as_io(cx, cge_graph_set_value_type(b->dst, vi->name, vt.vtype), what);
            if (!st)
                st = as_io(cx, cge_graph_set_desc(b->dst, vi->name, vt.dtype, &vt.shape), what);
            continue;
        }
        if (is_main && !vt.has_shape)
            return cge__onnx_unsupported(cx, "%s declares no shape (unknown rank); give it one "
                                            "with cge_onnx_options.input_shapes", what);
        for (int32_t a = 0; is_main && !st && a < vt.shape.rank; a++)
            if (vt.shape.dims[a] == CGE_DIM_DYNAMIC)
                st = anonymous_dim(cx, b->dst, vi->name, a, what, &vt.shape.dims[a]);
        if (!st)
            st = as_io(cx, cge_graph_add_input(b->dst, vi->name, vt.dtype, &vt.shape), what);
    }
    for (int32_t k = 0; is_main && k < cx->opts->num_input_shapes; k++) {
        const char *n = cx->opts->input_shapes[k].name;
        bool found = false;
        for (int32_t i = 0; n && i < cge_graph_num_inputs(b->dst); i++)
            found |= !strcmp(cge_graph_input(b->dst, i), n);
        if (!found)
            return cge_error(CGE_LAYER_IO, CGE_ERR_NOT_FOUND,
                             "%s: input_shapes names '%s', which is not an input of the model",
                             cx->label, n ? n : "(null)");
    }
    return st;
}

/* value_info and output types describe values the nodes produce; meta will
 * refine them at compile time. Only complete tensor descriptions are kept. */
static void add_value_info(graph_build *b, const Onnx__ValueInfoProto *vi)
{
    if (!vi || !vi->name || !cge_graph_producer(b->dst, vi->name))
        return;
    value_type vt;
    if (parse_type(b->cx, b->dst, vi->type, vi->name, &vt) != CGE_OK) {
        cge_clear_error();
        return;
    }
    /* What a value holds is known here before meta runs (a graph output
     * that is a sequence, whatever its producer). */
    if (vt.vtype != CGE_TYPE_TENSOR &&
        cge_graph_set_value_type(b->dst, vi->name, vt.vtype) != CGE_OK)
        cge_clear_error();
    if (vt.dtype != CGE_DTYPE_UNDEFINED && vt.has_shape &&
        cge_graph_set_desc(b->dst, vi->name, vt.dtype, &vt.shape) != CGE_OK)
        cge_clear_error();
}

static cge_status import_graph(onnx_ctx *cx, const Onnx__GraphProto *gp, int depth, bool is_main,
                               cge_graph **out)
{
    *out = NULL;
    if (depth > CGE_ONNX_MAX_DEPTH)
        return cge__onnx_io_error(cx, "graphs are nested more than %d deep", CGE_ONNX_MAX_DEPTH);
    graph_build b = {.cx = cx, .gp = gp, .depth = depth};
    const char *gname = gp->name && gp->name[0] ? gp->name : (is_main ? "onnx_model" : "subgraph");
    cge_status st = cge_graph_create(gname, &b.dst);
    if (!st)
        st = cge_graph_create("onnx_source", &b.src);
    if (!st && gp->n_sparse_initializer)
        st = cge__onnx_unsupported(cx, "graph '%s': sparse initializers are not supported", gname);
    for (size_t i = 0; !st && i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp || !tp->name || !tp->name[0]) {
            st = cge__onnx_io_error(cx, "initializer %zu has no name", i);
            break;
        }
        char what[512];
        snprintf(what, sizeof what, "initializer '%s'", tp->name);
        /* The weights' one copy: from the model's bytes (or an external
         * file's mapping) into the graph's constant. */
        cge_tensor t;
        onnx_bytes how;
        const onnx_raw *raw = is_main && i < cx->num_raw ? &cx->raw[i] : NULL;
        st = cge__onnx_view_tensor(cx, tp, what, raw, &t, &how);
        if (!st && how == ONNX_BYTES_MAPPED) {
            void *block = cge__onnx_copy_mapped(cx, t.data, t.bytes);
            st = block ? as_io(cx, cge__graph_add_constant_block(b.dst, tp->name, t.dtype, &t.shape,
                                                                  block, t.bytes), what)
                       : oom();
        } else if (!st) {
            st = as_io(cx, cge_graph_add_constant(b.dst, tp->name, t.dtype, &t.shape, t.data,
                                                  t.bytes), what);
            if (how == ONNX_BYTES_OWNED)
                free(t.data);
        }
    }
    if (!st)
        st = add_inputs(&b, is_main);
    for (size_t i = 0; !st && i < gp->n_node; i++)
        st = import_node(&b, gp->node[i], i);
    for (size_t i = 0; !st && i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        if (!vi || !vi->name || !vi->name[0]) {
            st = cge__onnx_io_error(cx, "graph output %zu has no name", i);
            break;
        }
        char what[512];
        snprintf(what, sizeof what, "graph output '%s'", vi->name);
        value_type vt;
        st = parse_type(cx, b.dst, vi->type, what, &vt);
        if (!st)
            st = as_io(cx, cge_graph_add_output(b.dst, vi->name), what);
    }
    for (size_t i = 0; !st && i < gp->n_value_info; i++)
        add_value_info(&b, gp->value_info[i]);
    for (size_t i = 0; !st && i < gp->n_output; i++)
        add_value_info(&b, gp->output[i]);
    cge_graph_destroy(b.src);
    if (st) {
        cge_graph_destroy(b.dst);
        return st;
    }
    *out = b.dst;
    return CGE_OK;
}

/* ---- entry points ------------------------------------------------------- */

/* `own`: the importer's own read-only mapping of the file, which data is
 * (NULL: the caller's bytes): initializers are read from the file and its
 * pages may be dropped. */
static cge_status import_model(const void *data, size_t size, const char *base_dir,
                               const char *label, const cge_onnx_options *opts,
                               const onnx_mapping *own, cge_graph **out)
{
    if (!out)
        return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG, "onnx import: out is NULL");
    *out = NULL;
    if (!data && size)
        return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG, "onnx import: data is NULL");
    cge_status st = cge_onnx_register_converters();
    if (st)
        return st;
    onnx_ctx cx = {.label = label, .base_dir = base_dir, .opts = opts ? opts : &no_options,
                   .own_buffer = own != NULL, .model_map = own, .cache_ext = true};
    if (size == 0)
        return cge__onnx_io_error(&cx, "empty input: not an ONNX model");
    st = cge__onnx_check_wire(&cx, data, size, &onnx__model_proto__descriptor);
    if (st)
        return st;
    /* protobuf-c copies every bytes field: it unpacks a copy without the
     * initializers' raw_data, which stays in `data` until the graph's
     * constants take it (one copy of the weights, not three). */
    uint8_t *slim = NULL;
    size_t slim_size = 0, num_raw = 0;
    onnx_raw *raw = NULL;
    st = cge__onnx_slim_model(&cx, data, size, &slim, &slim_size, &raw, &num_raw);
    if (st)
        return st;
    cx.raw = raw;
    cx.num_raw = num_raw;
    Onnx__ModelProto *m = slim ? onnx__model_proto__unpack(NULL, slim_size, slim)
                               : onnx__model_proto__unpack(NULL, size, data);
    free(slim);
    if (!m) {
        free(raw);
        return cge__onnx_io_error(&cx, "not a valid ONNX model (protobuf decoding failed)");
    }
    if (!m->graph)
        st = cge__onnx_io_error(&cx, "the model has no graph");
    if (!st && m->n_opset_import == 0)
        st = cge__onnx_io_error(&cx, "the model imports no operator set (opset_import is empty)");
    if (!st) {
        cx.opsets = calloc(m->n_opset_import, sizeof *cx.opsets);
        if (!cx.opsets)
            st = oom();
    }
    for (size_t i = 0; !st && i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (!o || !o->has_version)
            st = cge__onnx_io_error(&cx, "opset_import %zu has no version", i);
        else if (!norm_domain(o->domain)[0] && o->version > CGE_ONNX_MAX_OPSET)
            st = cge__onnx_unsupported(&cx, "the model imports opset %lld of the default domain; "
                                            "this cge supports opsets up to %d",
                                       (long long)o->version, CGE_ONNX_MAX_OPSET);
        else
            cx.opsets[cx.num_opsets++] = (onnx_opset){norm_domain(o->domain), o->version};
    }
    if (!st)
        st = import_graph(&cx, m->graph, 0, true, out);
    free(cx.opsets);
    free(raw);
    cge__onnx_unmap_external(&cx);
    onnx__model_proto__free_unpacked(m, NULL);
    return st;
}

cge_status cge_onnx_import_buffer(const void *data, size_t size, const char *base_dir,
                                  const cge_onnx_options *opts, cge_graph **out)
{
    return import_model(data, size, base_dir, "<buffer>", opts, NULL, out);
}

cge_status cge_onnx_import_file(const char *path, const cge_onnx_options *opts, cge_graph **out)
{
    if (out)
        *out = NULL;
    if (!path || !path[0])
        return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG, "onnx import: no path");
    /* Mapped, not read: the weights are copied once, from the page cache
     * into the graph, and their pages dropped as they are. */
    const char *why = NULL;
    onnx_mapping map;
    cge_status st = cge__onnx_map_file(path, &map, &why);
    if (st == CGE_ERR_NO_MEMORY)
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory", path);
    if (st)
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: cannot open: %s", path, why);
    char *dir = dup_bytes(path, strlen(path));
    if (!dir) {
        cge__onnx_unmap(&map);
        return oom();
    }
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    st = import_model(map.data, map.size, dir, path, opts, map.mapped ? &map : NULL, out);
    free(dir);
    cge__onnx_unmap(&map);
    return st;
}
