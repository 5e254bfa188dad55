/* Node attributes: every ONNX attribute kind, stored as deep copies (strings,
 * arrays, tensor data, cloned subgraphs) so that a node owns all it points to. */
#include <stdlib.h>
#include <string.h>

#include "base/strings.h"
#include "ir/graph_internal.h"

const char *cge_attr_kind_name(cge_attr_kind k)
{
    switch (k) {
    case CGE_ATTR_UNDEFINED: return "undefined";
    case CGE_ATTR_FLOAT: return "float";
    case CGE_ATTR_INT: return "int";
    case CGE_ATTR_STRING: return "string";
    case CGE_ATTR_TENSOR: return "tensor";
    case CGE_ATTR_GRAPH: return "graph";
    case CGE_ATTR_FLOATS: return "floats";
    case CGE_ATTR_INTS: return "ints";
    case CGE_ATTR_STRINGS: return "strings";
    case CGE_ATTR_TENSORS: return "tensors";
    case CGE_ATTR_GRAPHS: return "graphs";
    }
    return "invalid";
}

void *cge__ir_aligned_copy(const void *data, size_t bytes)
{
    /* aligned_alloc wants a multiple of the alignment; 0 bytes still gets a
     * block so that kernels never see NULL for an empty tensor. */
    size_t size = bytes ? bytes : 1;
    if (size > SIZE_MAX - 63)
        return NULL;
    size = (size + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, size);
    if (p && bytes && data)   /* NULL data: left for the caller to fill */
        memcpy(p, data, bytes);
    return p;
}

static cge_status attr_error(const cge_attrs *a, const char *attr, cge_status st, const char *what)
{
    if (a && a->owner)
        return cge__ir_node_error(a->owner, st, "attribute '%s': %s", attr ? attr : "(null)", what);
    return cge_error(CGE_LAYER_GRAPH, st, "attribute '%s': %s", attr ? attr : "(null)", what);
}

static char *str_dup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static void tensor_release(cge_tensor *t)
{
    free((void *)t->name);
    free(t->data);
    memset(t, 0, sizeof *t);
}

static cge_status tensor_copy(const cge_attrs *a, const char *attr, const cge_tensor *src,
                              cge_tensor *dst)
{
    char msg[256];
    memset(dst, 0, sizeof *dst);
    if (!cge_dtype_valid(src->dtype)) {
        snprintf(msg, sizeof msg, "tensor has invalid dtype %d", (int)src->dtype);
        return attr_error(a, attr, CGE_ERR_INVALID_ARG, msg);
    }
    if (src->shape.rank < 0 || src->shape.rank > CGE_MAX_RANK) {
        snprintf(msg, sizeof msg, "tensor has rank %d (0..%d allowed)", (int)src->shape.rank,
                 CGE_MAX_RANK);
        return attr_error(a, attr, CGE_ERR_INVALID_ARG, msg);
    }
    if (!cge_shape_is_static(&src->shape)) {
        return attr_error(a, attr, CGE_ERR_INVALID_ARG,
                          "a tensor value needs a static shape (no dynamic dimensions)");
    }
    size_t need = cge_tensor_nbytes(src->dtype, &src->shape);
    if (src->bytes != need) {
        char shp[CGE_SHAPE_STR_MAX];
        snprintf(msg, sizeof msg, "tensor %s %s needs %zu bytes, %zu given",
                 cge_dtype_name(src->dtype), cge_shape_str(&src->shape, shp, sizeof shp), need,
                 src->bytes);
        return attr_error(a, attr, CGE_ERR_INVALID_ARG, msg);
    }
    if (need && !src->data)
        return attr_error(a, attr, CGE_ERR_INVALID_ARG, "tensor data is NULL");
    dst->dtype = src->dtype;
    dst->shape = src->shape;
    dst->bytes = src->bytes;
    if (src->dtype == CGE_STRING) {
        /* The elements and their bytes in one block (the node owns both). */
        int64_t n = cge_shape_numel(&src->shape);
        size_t packed = cge__strings_packed_size(src->data, n);
        if (packed == SIZE_MAX)
            return attr_error(a, attr, CGE_ERR_INVALID_ARG,
                              "a string element has a negative size or NULL data");
        dst->data = cge__ir_aligned_copy(NULL, packed);
        if (dst->data)
            cge__strings_pack(dst->data, src->data, n);
    } else {
        dst->data = cge__ir_aligned_copy(src->data, src->bytes);
    }
    if (src->name)
        dst->name = str_dup(src->name);
    if (!dst->data || (src->name && !dst->name)) {
        tensor_release(dst);
        return attr_error(a, attr, CGE_ERR_NO_MEMORY, "out of memory copying a tensor");
    }
    return CGE_OK;
}

static void attr_release(cge_attr *v)
{
    free((void *)v->name);
    switch (v->kind) {
    case CGE_ATTR_STRING: free((void *)v->s); break;
    case CGE_ATTR_TENSOR:
        if (v->t)
            tensor_release((cge_tensor *)v->t);
        free((void *)v->t);
        break;
    case CGE_ATTR_GRAPH: cge_graph_destroy((cge_graph *)v->g); break;
    case CGE_ATTR_FLOATS: free((void *)v->floats); break;
    case CGE_ATTR_INTS: free((void *)v->ints); break;
    case CGE_ATTR_STRINGS:
        for (int64_t i = 0; v->strings && i < v->n; i++)
            free((void *)v->strings[i]);
        free((void *)v->strings);
        break;
    case CGE_ATTR_TENSORS:
        for (int64_t i = 0; v->tensors && i < v->n; i++)
            tensor_release((cge_tensor *)&v->tensors[i]);
        free((void *)v->tensors);
        break;
    case CGE_ATTR_GRAPHS:
        for (int64_t i = 0; v->graphs && i < v->n; i++)
            cge_graph_destroy((cge_graph *)v->graphs[i]);
        free((void *)v->graphs);
        break;
    default: break;
    }
    memset(v, 0, sizeof *v);
}

/* Allocate a zeroed list of n items (`have`: the caller gave an array);
 * n == 0 stores NULL. Zeroed items make a half-copied list safe to release. */
static cge_status list_alloc(const cge_attrs *a, const char *attr, bool have, int64_t n,
                             size_t elem, void **dst)
{
    *dst = NULL;
    if (n < 0)
        return attr_error(a, attr, CGE_ERR_INVALID_ARG, "list length is negative");
    if (n == 0)
        return CGE_OK;
    if (!have)
        return attr_error(a, attr, CGE_ERR_INVALID_ARG, "list has a length but no items (NULL)");
    if ((uint64_t)n > SIZE_MAX / elem)
        return attr_error(a, attr, CGE_ERR_NO_MEMORY, "list too long");
    *dst = calloc((size_t)n, elem);
    if (!*dst)
        return attr_error(a, attr, CGE_ERR_NO_MEMORY, "out of memory copying a list");
    return CGE_OK;
}

/* Validate `src` and deep-copy it into `dst`; on failure nothing is owned. */
static cge_status attr_copy(const cge_attrs *a, const cge_attr *src, cge_attr *dst)
{
    memset(dst, 0, sizeof *dst);
    if (!src->name || !src->name[0])
        return attr_error(a, src->name, CGE_ERR_INVALID_ARG, "an attribute needs a name");
    const char *nm = src->name;
    cge_status st = CGE_OK;
    dst->kind = src->kind;
    switch (src->kind) {
    case CGE_ATTR_INT: dst->i = src->i; break;
    case CGE_ATTR_FLOAT: dst->f = src->f; break;
    case CGE_ATTR_STRING:
        if (!src->s)
            return attr_error(a, nm, CGE_ERR_INVALID_ARG, "string value is NULL");
        if (!(dst->s = str_dup(src->s)))
            return attr_error(a, nm, CGE_ERR_NO_MEMORY, "out of memory copying a string");
        break;
    case CGE_ATTR_TENSOR: {
        if (!src->t)
            return attr_error(a, nm, CGE_ERR_INVALID_ARG, "tensor value is NULL");
        cge_tensor *t = malloc(sizeof *t);
        if (!t)
            return attr_error(a, nm, CGE_ERR_NO_MEMORY, "out of memory copying a tensor");
        if ((st = tensor_copy(a, nm, src->t, t)) != CGE_OK) {
            free(t);
            return st;
        }
        dst->t = t;
        break;
    }
    case CGE_ATTR_GRAPH: {
        if (!src->g)
            return attr_error(a, nm, CGE_ERR_INVALID_ARG, "graph value is NULL");
        cge_graph *g = NULL;
        if ((st = cge_graph_clone(src->g, &g)) != CGE_OK)
            return st;
        dst->g = g;
        break;
    }
    case CGE_ATTR_FLOATS: {
        void *p;
        st = list_alloc(a, nm, src->floats != NULL, src->n, sizeof(float), &p);
        if (st != CGE_OK)
            return st;
        if (p)
            memcpy(p, src->floats, (size_t)src->n * sizeof(float));
        dst->floats = p;
        dst->n = src->n;
        break;
    }
    case CGE_ATTR_INTS: {
        void *p;
        st = list_alloc(a, nm, src->ints != NULL, src->n, sizeof(int64_t), &p);
        if (st != CGE_OK)
            return st;
        if (p)
            memcpy(p, src->ints, (size_t)src->n * sizeof(int64_t));
        dst->ints = p;
        dst->n = src->n;
        break;
    }
    case CGE_ATTR_STRINGS: {
        void *p;
        st = list_alloc(a, nm, src->strings != NULL, src->n, sizeof(char *), &p);
        if (st != CGE_OK)
            return st;
        char **items = p;
        dst->strings = (const char *const *)items;
        dst->n = src->n;
        for (int64_t i = 0; i < src->n; i++) {
            if (!src->strings[i])
                st = attr_error(a, nm, CGE_ERR_INVALID_ARG, "a string in the list is NULL");
            else if (!(items[i] = str_dup(src->strings[i])))
                st = attr_error(a, nm, CGE_ERR_NO_MEMORY, "out of memory copying a string");
            if (st != CGE_OK)
                break;
        }
        break;
    }
    case CGE_ATTR_TENSORS: {
        void *p;
        st = list_alloc(a, nm, src->tensors != NULL, src->n, sizeof(cge_tensor), &p);
        if (st != CGE_OK)
            return st;
        cge_tensor *items = p;
        dst->tensors = items;
        dst->n = src->n;
        for (int64_t i = 0; i < src->n && st == CGE_OK; i++)
            st = tensor_copy(a, nm, &src->tensors[i], &items[i]);
        break;
    }
    case CGE_ATTR_GRAPHS: {
        void *p;
        st = list_alloc(a, nm, src->graphs != NULL, src->n, sizeof(cge_graph *), &p);
        if (st != CGE_OK)
            return st;
        cge_graph **items = p;
        dst->graphs = (const cge_graph *const *)items;
        dst->n = src->n;
        for (int64_t i = 0; i < src->n && st == CGE_OK; i++) {
            if (!src->graphs[i])
                st = attr_error(a, nm, CGE_ERR_INVALID_ARG, "a graph in the list is NULL");
            else
                st = cge_graph_clone(src->graphs[i], &items[i]);
        }
        break;
    }
    default: {
        char msg[64];
        snprintf(msg, sizeof msg, "unknown attribute kind %d", (int)src->kind);
        return attr_error(a, nm, CGE_ERR_INVALID_ARG, msg);
    }
    }
    if (st == CGE_OK && !(dst->name = str_dup(nm)))
        st = attr_error(a, nm, CGE_ERR_NO_MEMORY, "out of memory copying a name");
    if (st != CGE_OK)
        attr_release(dst);   /* list items not yet copied are zero (calloc) */
    return st;
}

void cge__ir_attrs_init(cge_attrs *a, const cge_node *owner)
{
    memset(a, 0, sizeof *a);
    a->owner = owner;
}

void cge__ir_attrs_release(cge_attrs *a)
{
    for (int32_t i = 0; i < a->count; i++)
        attr_release(&a->items[i]);
    free(a->items);
    a->items = NULL;
    a->count = a->cap = 0;
}

cge_status cge__ir_attrs_copy(cge_attrs *dst, const cge_attrs *src)
{
    if (!src->count)
        return CGE_OK;
    if (!cge__ir_grow((void **)&dst->items, &dst->cap, src->count, sizeof(cge_attr)))
        return attr_error(dst, src->items[0].name, CGE_ERR_NO_MEMORY, "out of memory");
    for (int32_t i = 0; i < src->count; i++) {
        cge_status st = attr_copy(dst, &src->items[i], &dst->items[i]);
        if (st != CGE_OK)
            return st;
        dst->count++;
    }
    return CGE_OK;
}

static int32_t attrs_index(const cge_attrs *a, const char *name)
{
    if (!a || !name)
        return -1;
    for (int32_t i = 0; i < a->count; i++)
        if (strcmp(a->items[i].name, name) == 0)
            return i;
    return -1;
}

int32_t cge_attrs_count(const cge_attrs *a) { return a ? a->count : 0; }

const cge_attr *cge_attrs_at(const cge_attrs *a, int32_t index)
{
    if (!a || index < 0 || index >= a->count)
        return NULL;
    return &a->items[index];
}

const cge_attr *cge_attrs_find(const cge_attrs *a, const char *name)
{
    int32_t i = attrs_index(a, name);
    return i >= 0 ? &a->items[i] : NULL;
}

static const cge_attr *find_kind(const cge_attrs *a, const char *name, cge_attr_kind kind)
{
    const cge_attr *v = cge_attrs_find(a, name);
    return v && v->kind == kind ? v : NULL;
}

int64_t cge_attrs_get_int(const cge_attrs *a, const char *name, int64_t dflt)
{
    const cge_attr *v = find_kind(a, name, CGE_ATTR_INT);
    return v ? v->i : dflt;
}

float cge_attrs_get_float(const cge_attrs *a, const char *name, float dflt)
{
    const cge_attr *v = find_kind(a, name, CGE_ATTR_FLOAT);
    return v ? v->f : dflt;
}

const char *cge_attrs_get_string(const cge_attrs *a, const char *name, const char *dflt)
{
    const cge_attr *v = find_kind(a, name, CGE_ATTR_STRING);
    return v ? v->s : dflt;
}

int64_t cge_attrs_get_ints(const cge_attrs *a, const char *name, const int64_t **vals)
{
    const cge_attr *v = find_kind(a, name, CGE_ATTR_INTS);
    if (vals)
        *vals = v ? v->ints : NULL;
    return v ? v->n : -1;
}

int64_t cge_attrs_get_floats(const cge_attrs *a, const char *name, const float **vals)
{
    const cge_attr *v = find_kind(a, name, CGE_ATTR_FLOATS);
    if (vals)
        *vals = v ? v->floats : NULL;
    return v ? v->n : -1;
}

const cge_tensor *cge_attrs_get_tensor(const cge_attrs *a, const char *name)
{
    const cge_attr *v = find_kind(a, name, CGE_ATTR_TENSOR);
    return v ? v->t : NULL;
}

const cge_graph *cge_attrs_get_graph(const cge_attrs *a, const char *name)
{
    const cge_attr *v = find_kind(a, name, CGE_ATTR_GRAPH);
    return v ? v->g : NULL;
}

cge_status cge_attrs_set(cge_attrs *a, const cge_attr *value)
{
    if (!a || !value)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "cge_attrs_set: attribute set or value is NULL");
    cge_attr copy;
    cge_status st = attr_copy(a, value, &copy);
    if (st != CGE_OK)
        return st;
    if (a->owner)
        cge__ir_touch((cge_node *)a->owner);
    int32_t i = attrs_index(a, copy.name);
    if (i >= 0) {
        attr_release(&a->items[i]);
        a->items[i] = copy;
        return CGE_OK;
    }
    if (!cge__ir_grow((void **)&a->items, &a->cap, (int64_t)a->count + 1, sizeof(cge_attr))) {
        attr_release(&copy);
        return attr_error(a, value->name, CGE_ERR_NO_MEMORY, "out of memory");
    }
    a->items[a->count++] = copy;
    return CGE_OK;
}

cge_status cge_attrs_remove(cge_attrs *a, const char *name)
{
    int32_t i = attrs_index(a, name);
    if (i < 0)
        return attr_error(a, name, CGE_ERR_NOT_FOUND, "no attribute of that name to remove");
    if (a->owner)
        cge__ir_touch((cge_node *)a->owner);
    attr_release(&a->items[i]);
    memmove(&a->items[i], &a->items[i + 1], (size_t)(a->count - i - 1) * sizeof(cge_attr));
    a->count--;
    return CGE_OK;
}

/* ---- convenience setters on nodes ---------------------------------------- */

static cge_status node_set(cge_node *n, const cge_attr *v)
{
    if (!n)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "setting attribute '%s': node is NULL", v->name ? v->name : "(null)");
    return cge_attrs_set(&n->attrs, v);
}

cge_status cge_node_set_int(cge_node *n, const char *name, int64_t v)
{
    return node_set(n, &(cge_attr){.name = name, .kind = CGE_ATTR_INT, .i = v});
}

cge_status cge_node_set_float(cge_node *n, const char *name, float v)
{
    return node_set(n, &(cge_attr){.name = name, .kind = CGE_ATTR_FLOAT, .f = v});
}

cge_status cge_node_set_string(cge_node *n, const char *name, const char *v)
{
    return node_set(n, &(cge_attr){.name = name, .kind = CGE_ATTR_STRING, .s = v});
}

cge_status cge_node_set_ints(cge_node *n, const char *name, const int64_t *v, int64_t count)
{
    return node_set(n, &(cge_attr){.name = name, .kind = CGE_ATTR_INTS, .ints = v, .n = count});
}

cge_status cge_node_set_floats(cge_node *n, const char *name, const float *v, int64_t count)
{
    return node_set(n,
                    &(cge_attr){.name = name, .kind = CGE_ATTR_FLOATS, .floats = v, .n = count});
}

cge_status cge_node_set_tensor(cge_node *n, const char *name, const cge_tensor *t)
{
    return node_set(n, &(cge_attr){.name = name, .kind = CGE_ATTR_TENSOR, .t = t});
}

cge_status cge_node_set_graph(cge_node *n, const char *name, const cge_graph *sub)
{
    return node_set(n, &(cge_attr){.name = name, .kind = CGE_ATTR_GRAPH, .g = sub});
}
