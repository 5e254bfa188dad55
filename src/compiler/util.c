/* Helpers shared by the passes: use lists with redirection, bypassing no-op
 * nodes (graph outputs keep their names), fresh names, constant inspection,
 * attribute equality and hashing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/strmap.h"
#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

double cc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static cge_status oom(void)
{
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "compile: out of memory");
}

/* ---- use lists -------------------------------------------------------------- */

static bool grow_ids(cc_uses *u, int32_t n)
{
    if (n <= u->num_ids)
        return true;
    int32_t *s = realloc(u->start, sizeof(int32_t) * ((size_t)n + 1));
    if (s)
        u->start = s;
    int32_t *c = s ? realloc(u->count, sizeof(int32_t) * (size_t)n) : NULL;
    if (c)
        u->count = c;
    cc_use **e = c ? realloc(u->extra, sizeof(cc_use *) * (size_t)n) : NULL;
    if (e)
        u->extra = e;
    int32_t *ne = e ? realloc(u->num_extra, sizeof(int32_t) * (size_t)n) : NULL;
    if (ne)
        u->num_extra = ne;
    int32_t *ce = ne ? realloc(u->cap_extra, sizeof(int32_t) * (size_t)n) : NULL;
    if (ce)
        u->cap_extra = ce;
    if (!ce)
        return false;
    for (int32_t i = u->num_ids; i < n; i++) {
        u->start[i] = 0;
        u->count[i] = 0;
        u->extra[i] = NULL;
        u->num_extra[i] = 0;
        u->cap_extra[i] = 0;
    }
    u->num_ids = n;
    return true;
}

cge_status cc_uses_build(cc_uses *u, const cge_graph *g)
{
    memset(u, 0, sizeof *u);
    int32_t nv = cge_graph_num_values(g), nn = cge_graph_num_nodes(g);
    if (!grow_ids(u, nv > 0 ? nv : 1))
        return oom();
    int64_t edges = 0;
    for (int32_t i = 0; i < nn; i++) {
        const cge_node *n = cge_graph_node(g, i);
        for (int32_t k = 0; k < cge_node_num_inputs(n); k++) {
            int32_t id = cge_node_input_id(n, k);
            if (id >= 0) {
                u->start[id + 1]++;
                edges++;
            }
        }
    }
    for (int32_t i = 0; i < u->num_ids; i++)
        u->start[i + 1] += u->start[i];
    u->items = malloc(sizeof(cc_use) * (size_t)(edges + 1));
    if (!u->items)
        return oom();
    for (int32_t i = 0; i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        for (int32_t k = 0; k < cge_node_num_inputs(n); k++) {
            int32_t id = cge_node_input_id(n, k);
            if (id >= 0)
                u->items[u->start[id] + u->count[id]++] = (cc_use){n, k};
        }
    }
    return CGE_OK;
}

void cc_uses_free(cc_uses *u)
{
    if (u->extra)
        for (int32_t i = 0; i < u->num_ids; i++)
            free(u->extra[i]);
    free(u->start);
    free(u->count);
    free(u->items);
    free(u->extra);
    free(u->num_extra);
    free(u->cap_extra);
    memset(u, 0, sizeof *u);
}

static bool use_live(const cc_use *x, int32_t id)
{
    return !cge_node_is_removed(x->node) && cge_node_input_id(x->node, x->slot) == id;
}

int32_t cc_uses_list(const cc_uses *u, int32_t id, cc_use *out, int32_t max)
{
    if (id < 0 || id >= u->num_ids)
        return 0;
    int32_t n = 0;
    for (int32_t k = 0; k < u->count[id]; k++) {
        const cc_use *x = &u->items[u->start[id] + k];
        if (use_live(x, id)) {
            if (n < max)
                out[n] = *x;
            n++;
        }
    }
    for (int32_t k = 0; k < u->num_extra[id]; k++) {
        const cc_use *x = &u->extra[id][k];
        if (use_live(x, id)) {
            if (n < max)
                out[n] = *x;
            n++;
        }
    }
    return n;
}

int32_t cc_uses_count(const cc_uses *u, int32_t id) { return cc_uses_list(u, id, NULL, 0); }

bool cc_value_used(const cc_uses *u, const cge_graph *g, int32_t id)
{
    return cge_graph_value_is_output(g, id) || cc_uses_count(u, id) > 0;
}

static bool push_extra(cc_uses *u, int32_t id, cc_use x)
{
    if (!grow_ids(u, id + 1))
        return false;
    if (u->num_extra[id] == u->cap_extra[id]) {
        int32_t nc = u->cap_extra[id] ? u->cap_extra[id] * 2 : 4;
        cc_use *p = realloc(u->extra[id], sizeof(cc_use) * (size_t)nc);
        if (!p)
            return false;
        u->extra[id] = p;
        u->cap_extra[id] = nc;
    }
    u->extra[id][u->num_extra[id]++] = x;
    return true;
}

cge_status cc_uses_add(cc_uses *u, cge_node *n, int32_t slot)
{
    int32_t id = cge_node_input_id(n, slot);
    if (id >= 0 && !push_extra(u, id, (cc_use){n, slot}))
        return oom();
    return CGE_OK;
}

cge_status cc_uses_add_node(cc_uses *u, cge_node *n)
{
    cge_status st = CGE_OK;
    for (int32_t k = 0; !st && k < cge_node_num_inputs(n); k++)
        st = cc_uses_add(u, n, k);
    return st;
}

cge_status cc_fused_node(cc_ctx *ctx, cc_uses *u, cge_node *n, int32_t count)
{
    ctx->fused += count;
    ctx->removed += count;
    ctx->added++;
    return cc_uses_add_node(u, n);
}

cge_status cc_redirect(cc_uses *u, cge_graph *g, int32_t from, int32_t to)
{
    if (from == to || from < 0 || from >= u->num_ids)
        return CGE_OK;
    const char *to_name = cge_graph_value_name(g, to);
    int32_t n = cc_uses_count(u, from);
    if (!n)
        return CGE_OK;
    cc_use stack[16];
    cc_use *list = n <= 16 ? stack : malloc(sizeof(cc_use) * (size_t)n);
    if (!list)
        return oom();
    cc_uses_list(u, from, list, n);
    cge_status st = CGE_OK;
    for (int32_t k = 0; !st && k < n; k++) {
        st = cge_node_set_input(list[k].node, list[k].slot, to_name);
        if (!st && !push_extra(u, to, list[k]))
            st = oom();
    }
    if (list != stack)
        free(list);
    return st;
}

cge_status cc_bypass(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *n, int32_t out_slot,
                     int32_t with, bool *done)
{
    *done = false;
    int32_t old = cge_node_output_id(n, out_slot);
    if (old < 0 || with < 0 || old == with)
        return CGE_OK;
    if (!cge_graph_value_is_output(g, old)) {
        cge_status st = cc_redirect(u, g, old, with);
        if (!st)
            st = cge_graph_remove_node(g, n);
        if (!st) {
            ctx->removed++;
            *done = true;
        }
        return st;
    }
    /* The graph output keeps its name: the node computing `with` produces it. */
    cge_node *p = cge_graph_value_producer(g, with);
    if (!p || cge_graph_value_is_output(g, with) || p == n)
        return CGE_OK;
    int32_t slot = -1;
    for (int32_t k = 0; k < cge_node_num_outputs(p); k++)
        if (cge_node_output_id(p, k) == with)
            slot = k;
    cge_status st = cge_graph_remove_node(g, n);
    if (!st)
        st = cge_node_set_output(p, slot, cge_graph_value_name(g, old));
    if (!st)
        st = cc_redirect(u, g, with, old);
    if (!st) {
        ctx->removed++;
        *done = true;
    }
    return st;
}

/* ---- small helpers ---------------------------------------------------------- */

const char *cc_fresh_name(cc_ctx *ctx, const cge_graph *g, const char *prefix, char *buf,
                          size_t size)
{
    do {
        snprintf(buf, size, "%s__cc%llu", prefix, (unsigned long long)ctx->uniq++);
    } while (cge_graph_value_id(g, buf) >= 0 || cge_graph_find_node(g, buf));
    return buf;
}

bool cc_is_op(const cge_node *n, const char *op_type)
{
    return !cge_node_is_removed(n) && !cge_node_domain(n)[0] &&
           !strcmp(cge_node_op_type(n), op_type);
}

bool cc_is_fused_op(const cge_node *n, const char *op_type)
{
    return n && !cge_node_is_removed(n) && !strcmp(cge_node_domain(n), CGE_DOMAIN_FUSED) &&
           !strcmp(cge_node_op_type(n), op_type);
}

const cge_tensor *cc_input_const(const cge_graph *g, const cge_node *n, int32_t i)
{
    return cge_graph_value_constant(g, cge_node_input_id(n, i));
}

cge_tensor_desc cc_in_desc(const cge_graph *g, const cge_node *n, int32_t i)
{
    cge_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.name = "";
    int32_t id = cge_node_input_id(n, i);
    if (id >= 0)
        cge_graph_value_desc(g, id, &d);
    return d;
}

cge_tensor_desc cc_out_desc(const cge_graph *g, const cge_node *n, int32_t i)
{
    cge_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.name = "";
    int32_t id = cge_node_output_id(n, i);
    if (id >= 0)
        cge_graph_value_desc(g, id, &d);
    return d;
}

static double elem(const cge_tensor *t, int64_t i, bool *neg_zero)
{
    double v = 0.0;
    switch (t->dtype) {
    case CGE_F32: v = ((const float *)t->data)[i]; break;
    case CGE_F64: v = ((const double *)t->data)[i]; break;
    case CGE_F16: v = cge_f16_to_f32(((const uint16_t *)t->data)[i]); break;
    case CGE_BF16: v = cge_bf16_to_f32(((const uint16_t *)t->data)[i]); break;
    case CGE_I8: v = ((const int8_t *)t->data)[i]; break;
    case CGE_U8: v = ((const uint8_t *)t->data)[i]; break;
    case CGE_I16: v = ((const int16_t *)t->data)[i]; break;
    case CGE_U16: v = ((const uint16_t *)t->data)[i]; break;
    case CGE_I32: v = ((const int32_t *)t->data)[i]; break;
    case CGE_U32: v = ((const uint32_t *)t->data)[i]; break;
    case CGE_I64: v = (double)((const int64_t *)t->data)[i]; break;
    case CGE_U64: v = (double)((const uint64_t *)t->data)[i]; break;
    case CGE_BOOL: v = ((const uint8_t *)t->data)[i] ? 1.0 : 0.0; break;
    default: v = NAN;
    }
    if (neg_zero)
        *neg_zero = v == 0.0 && signbit(v);
    return v;
}

bool cc_const_all_equal(const cge_tensor *t, double v, bool check_sign_of_zero)
{
    if (!t || !t->data)
        return false;
    int64_t n = cge_shape_numel(&t->shape);
    if (n <= 0)
        return false;
    bool want_neg = signbit(v);
    for (int64_t i = 0; i < n; i++) {
        bool nz;
        double x = elem(t, i, &nz);
        if (x != v)
            return false;
        if (check_sign_of_zero && v == 0.0 && cge_dtype_is_float(t->dtype) && nz != want_neg)
            return false;
    }
    return true;
}

bool cc_const_scalar(const cge_tensor *t, double *v)
{
    if (!t || !t->data || cge_shape_numel(&t->shape) != 1)
        return false;
    *v = elem(t, 0, NULL);
    return true;
}

bool cc_is_nondeterministic(const cge_node *n)
{
    const char *op = cge_node_op_type(n), *dom = cge_node_domain(n);
    /* Collectives (cge.dist) depend on other processes: never folded,
     * evaluated at compile time or merged. */
    if (dom && !strcmp(dom, "cge.dist"))
        return true;
    return !strncmp(op, "Random", 6) || !strcmp(op, "Multinomial") || !strcmp(op, "Bernoulli");
}

/* ---- attributes ---------------------------------------------------------------- */

static bool tensor_equal(const cge_tensor *a, const cge_tensor *b)
{
    return a->dtype == b->dtype && cge_shape_equal(&a->shape, &b->shape) && a->bytes == b->bytes &&
           (!a->bytes || !memcmp(a->data, b->data, a->bytes));
}

static bool attr_equal(const cge_attr *a, const cge_attr *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case CGE_ATTR_INT: return a->i == b->i;
    case CGE_ATTR_FLOAT: return !memcmp(&a->f, &b->f, sizeof a->f);
    case CGE_ATTR_STRING: return !strcmp(a->s ? a->s : "", b->s ? b->s : "");
    case CGE_ATTR_TENSOR: return tensor_equal(a->t, b->t);
    case CGE_ATTR_INTS:
        return a->n == b->n && (!a->n || !memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n));
    case CGE_ATTR_FLOATS:
        return a->n == b->n && (!a->n || !memcmp(a->floats, b->floats, sizeof(float) * (size_t)a->n));
    case CGE_ATTR_STRINGS:
        if (a->n != b->n)
            return false;
        for (int64_t k = 0; k < a->n; k++)
            if (strcmp(a->strings[k], b->strings[k]))
                return false;
        return true;
    case CGE_ATTR_TENSORS:
        if (a->n != b->n)
            return false;
        for (int64_t k = 0; k < a->n; k++)
            if (!tensor_equal(&a->tensors[k], &b->tensors[k]))
                return false;
        return true;
    default:
        /* Subgraphs: equal only if they are the same object. */
        return a->g == b->g && a->graphs == b->graphs;
    }
}

bool cc_attrs_equal(const cge_attrs *a, const cge_attrs *b)
{
    int32_t n = cge_attrs_count(a);
    if (n != cge_attrs_count(b))
        return false;
    for (int32_t i = 0; i < n; i++) {
        const cge_attr *x = cge_attrs_at(a, i);
        const cge_attr *y = cge_attrs_find(b, x->name);
        if (!y || !attr_equal(x, y))
            return false;
    }
    return true;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

uint64_t cc_attrs_hash(const cge_attrs *a)
{
    uint64_t sum = 0;
    for (int32_t i = 0; i < cge_attrs_count(a); i++) {
        const cge_attr *x = cge_attrs_at(a, i);
        uint64_t h = mix(cge__str_hash(x->name), (uint64_t)x->kind);
        switch (x->kind) {
        case CGE_ATTR_INT: h = mix(h, (uint64_t)x->i); break;
        case CGE_ATTR_FLOAT: {
            uint32_t b;
            memcpy(&b, &x->f, sizeof b);
            h = mix(h, b);
            break;
        }
        case CGE_ATTR_STRING: h = mix(h, cge__str_hash(x->s ? x->s : "")); break;
        case CGE_ATTR_INTS:
            for (int64_t k = 0; k < x->n; k++)
                h = mix(h, (uint64_t)x->ints[k]);
            break;
        default: h = mix(h, (uint64_t)x->n); break;
        }
        sum += h; /* order-insensitive */
    }
    return sum;
}

cge_status cc_add_const(cc_ctx *ctx, cge_graph *g, const char *prefix, cge_dtype dtype,
                        const cge_shape *shape, const void *data, char *buf, size_t size)
{
    cc_fresh_name(ctx, g, prefix, buf, size);
    return cge_graph_add_constant(g, buf, dtype, shape, data, cge_tensor_nbytes(dtype, shape));
}

cge_node *cc_only_consumer(const cc_uses *u, const cge_graph *g, int32_t id)
{
    cc_use one;
    if (cge_graph_value_is_output(g, id) || cc_uses_list(u, id, &one, 1) != 1)
        return NULL;
    return one.node;
}

int32_t cc_other_input(const cge_node *n, int32_t id)
{
    if (cge_node_num_inputs(n) != 2)
        return -1;
    if (cge_node_input_id(n, 0) == id)
        return cge_node_input_id(n, 1);
    if (cge_node_input_id(n, 1) == id)
        return cge_node_input_id(n, 0);
    return -1;
}

int64_t cc_int_at(const cge_tensor *t, int64_t i)
{
    return t->dtype == CGE_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

bool cc_scalar_near(const cge_graph *g, int32_t id, double v, double tol)
{
    double x;
    return cc_const_scalar(cge_graph_value_constant(g, id), &x) && fabs(x - v) <= tol;
}

cge_status cc_copy_attrs(cge_node *dst, const cge_node *src)
{
    const cge_attrs *a = cge_node_attrs_const(src);
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < cge_attrs_count(a); i++)
        st = cge_attrs_set(cge_node_attrs(dst), cge_attrs_at(a, i));
    return st;
}

const cge_op_def *cc_find_op(cc_ctx *ctx, const cge_node *n)
{
    const char *op = cge_node_op_type(n), *dom = cge_node_domain(n);
    size_t cap = sizeof ctx->opcache / sizeof ctx->opcache[0];
    size_t h = ((uintptr_t)op >> 4) & (cap - 1);
    for (size_t k = 0; k < cap; k++, h = (h + 1) & (cap - 1)) {
        struct cc_opcache *e = &ctx->opcache[h];
        if (!e->op_type) {
            const cge_op_def *d = cge_op_find(dom, op, 0);
            if (d)
                *e = (struct cc_opcache){op, dom, d};
            return d;
        }
        if (e->op_type == op && !strcmp(e->domain, dom))
            return e->def;
    }
    return cge_op_find(dom, op, 0);
}

bool cc_match_activation(const cge_graph *g, const cge_node *n, bool with_gelu,
                         cc_activation *out)
{
    *out = (cc_activation){.alpha = 0.01f, .lo = -INFINITY, .hi = INFINITY};
    const cge_attrs *at = cge_node_attrs_const(n);
    if (cc_is_op(n, "Relu"))
        out->name = "relu";
    else if (cc_is_op(n, "Sigmoid"))
        out->name = "sigmoid";
    else if (cc_is_op(n, "Tanh"))
        out->name = "tanh";
    else if (with_gelu && cc_is_op(n, "Gelu")) {
        const char *ap = cge_attrs_get_string(at, "approximate", "none");
        out->name = !strcmp(ap, "tanh") ? "gelu_tanh" : !strcmp(ap, "none") ? "gelu" : NULL;
    } else if (cc_is_op(n, "LeakyRelu")) {
        out->alpha = cge_attrs_get_float(at, "alpha", 0.01f);
        out->name = "leaky_relu";
    } else if (cc_is_op(n, "Clip")) {
        out->lo = cge_attrs_get_float(at, "min", -INFINITY);
        out->hi = cge_attrs_get_float(at, "max", INFINITY);
        for (int32_t i = 1; i < cge_node_num_inputs(n); i++) {
            if (cge_node_input_id(n, i) < 0)
                continue;
            double v;
            const cge_tensor *t = cc_input_const(g, n, i);
            if (!t || t->dtype != CGE_F32 || !cc_const_scalar(t, &v))
                return false;
            *(i == 1 ? &out->lo : &out->hi) = (float)v;
        }
        out->name = "clip";
    }
    return out->name != NULL;
}

bool cc_match_gated(const cc_uses *u, const cge_graph *g, int32_t y, cge_node **gate,
                    cge_node **mul)
{
    cc_use us[2];
    if (cge_graph_value_is_output(g, y) || cc_uses_count(u, y) != 2 ||
        cc_uses_list(u, y, us, 2) != 2)
        return false;
    for (int k = 0; k < 2; k++) {
        cge_node *s = us[k].node, *m = us[1 - k].node;
        if (!(cc_is_op(s, "Sigmoid") || cc_is_op(s, "HardSigmoid")) ||
            cge_node_num_inputs(s) != 1 || cge_node_num_outputs(s) != 1 || !cc_is_op(m, "Mul") ||
            cge_node_num_inputs(m) != 2 || cge_node_num_outputs(m) != 1)
            continue;
        int32_t sv = cge_node_output_id(s, 0);
        if (cc_only_consumer(u, g, sv) != m || cc_other_input(m, sv) != y)
            continue;
        *gate = s;
        *mul = m;
        return true;
    }
    return false;
}

cge_status cc_set_activation(cge_node *f, const cc_activation *a)
{
    if (!a->name)
        return CGE_OK;
    cge_status st = cge_node_set_string(f, "activation", a->name);
    if (!st && !strcmp(a->name, "leaky_relu"))
        st = cge_node_set_float(f, "alpha", a->alpha);
    if (!st && !strcmp(a->name, "clip")) {
        st = cge_node_set_float(f, "min", a->lo);
        if (!st)
            st = cge_node_set_float(f, "max", a->hi);
    }
    return st;
}

/* One element out per element in, at the same position. */
bool cc_is_elementwise(const cge_node *n)
{
    static const char *const ops[] = {
        "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "Add", "Sub", "Mul", "Div", "Max",
        "Min", "Sum", "Mean", "Neg", "Abs", "Exp", "Log", "Sqrt", "Erf", "Gelu", "HardSigmoid",
        "HardSwish", "Elu", "Selu", "Celu", "Softplus", "Softsign", "Reciprocal", "Pow", "Floor",
        "Ceil", "Round", "Sign", "Mish", "ThresholdedRelu", "Where", "Cast", "Not", "And", "Or",
        "Xor", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "IsNaN", "IsInf",
        "Sin", "Cos"};
    if (!cge_node_is_removed(n) && !strcmp(cge_node_op_type(n), "ElementwiseChain") &&
        !strcmp(cge_node_domain(n), CGE_DOMAIN_FUSED))
        return true;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (cc_is_op(n, ops[i]))
            return true;
    return false;
}

static const char *const view_ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};

bool cge_node_is_view(const cge_node *n) { return n && cc_is_view_op(n); }

bool cc_is_view_op(const cge_node *n)
{
    /* the layout passes' Transposes of NHWC bytes */
    if (!strcmp(cge_node_domain(n), CGE_DOMAIN_FUSED))
        return !strcmp(cge_node_op_type(n), "LayoutView");
    if (cge_node_domain(n)[0])
        return false;
    for (size_t i = 0; i < sizeof view_ops / sizeof view_ops[0]; i++)
        if (!strcmp(cge_node_op_type(n), view_ops[i]))
            return true;
    return false;
}
