/* optimize/widen_half inside control flow: the bodies of If, Loop and Scan
 * computed in float32. The node's interface stays as the model says (half
 * values in and out), so its body keeps its half inputs and outputs: a Cast
 * to float32 after each half input, a Cast back to half before each half
 * output, half constants of the body widened once now, and the half values
 * it reads from the outer scope given to it in float32 by the node (the
 * outer graph's float32 form of a widened value, a widened constant, or a
 * Cast before the node: once per run of the node, not per iteration).
 *
 * Why: bodies run on cge's body interpreter (ops/control_flow.c) with the
 * operators' kernels, whose half paths convert every element in their inner
 * loops: a Loop of 10 products [64,256]x[256,256] took 53 ms as float16
 * against 2.9 ms as float32. A loop-carried value is still rounded to half
 * at every iteration (the Cast before the body's output), as the model
 * computes it; within one iteration values are not rounded between
 * operators, as at the top level (a level-2 rewrite).
 *
 * A body is left as it is when a node could make a half value of its own or
 * depends on the dtype its inputs had: a Cast to half, CastLike, a constant
 * made half by an attribute (ConstantOfShape's value, EyeLike's dtype, ...),
 * sequences and optionals, nodes of other domains, nondeterministic nodes,
 * and nested bodies. Then the node's meta checks the rewritten bodies with
 * float32 outer values; a refusal keeps the bodies as they were. */
#include <stdlib.h>
#include <string.h>

#include "compiler/widen_half.h"
#include "ops/half_convert.h"

#define BODY_MAX_IO 256

/* Whether a body node computes in the dtypes its inputs bring. */
static bool body_node_keeps_types(const cge_node *n)
{
    const char *op = cge_node_op_type(n);
    if (cge_node_domain(n)[0] || cc_is_nondeterministic(n) || !strcmp(op, "CastLike") ||
        strstr(op, "Sequence") || strstr(op, "Optional"))
        return false;
    const cge_attrs *a = cge_node_attrs_const(n);
    bool constant = !strcmp(op, "Constant");
    for (int32_t i = 0; i < cge_attrs_count(a); i++) {
        const cge_attr *at = cge_attrs_at(a, i);
        switch (at->kind) {
        case CGE_ATTR_GRAPH:
        case CGE_ATTR_GRAPHS:
        case CGE_ATTR_TENSORS:
            return false;
        case CGE_ATTR_TENSOR:
            if (at->t && cc_is_half(at->t->dtype) && !(constant && !strcmp(at->name, "value")))
                return false;
            break;
        case CGE_ATTR_INT:
            if (cc_is_half((cge_dtype)at->i) &&
                (!strcmp(at->name, "to") || !strcmp(at->name, "dtype") ||
                 !strcmp(at->name, "output_dtype")))
                return false;
            break;
        default: break;
        }
    }
    return true;
}

/* Rewrites clone `b` of a body: half inputs (in_half[i]) pass a Cast to
 * float32, half constants and Constant nodes become float32, half outputs
 * (out_half[i]) are made by a Cast to `half` from their float32 producer.
 * *ok false: an output the rewrite cannot remake (an outer value). */
static cge_status rewrite_body(cc_ctx *ctx, cge_graph *b, const bool *in_half,
                               const bool *out_half, cge_dtype half, bool *ok)
{
    cge_status st = CGE_OK;
    char fresh[256], name[256];
    *ok = true;
    for (int32_t i = 0; !st && i < cge_graph_num_inputs(b); i++) {
        if (!in_half[i])
            continue;
        cge_tensor_desc d;
        snprintf(name, sizeof name, "%s", cge_graph_input(b, i));
        st = cge_graph_get_desc(b, name, &d);
        cc_fresh_name(ctx, b, name, fresh, sizeof fresh);
        if (!st)
            st = cge_graph_replace_uses(b, name, fresh);
        if (!st)
            st = cc_widen_cast(ctx, b, name, fresh, CGE_F32, &d.shape);
    }
    int32_t nc = cge_graph_num_constants(b);
    for (int32_t i = 0; !st && i < nc; i++) {
        snprintf(name, sizeof name, "%s", cge_graph_constant_name(b, i));
        const cge_tensor *t = cge_graph_value_constant(b, cge_graph_value_id(b, name));
        if (!t || !t->data || !cc_is_half(t->dtype))
            continue;
        st = cc_widen_constant(ctx, b, name, t, fresh, sizeof fresh);
        if (!st)
            st = cge_graph_replace_uses(b, name, fresh);
    }
    for (int32_t i = 0; !st && i < cge_graph_num_nodes(b); i++) {
        cge_node *n = cge_graph_node(b, i);
        const cge_tensor *t = cc_is_op(n, "Constant")
                                  ? cge_attrs_get_tensor(cge_node_attrs_const(n), "value")
                                  : NULL;
        if (cge_node_is_removed(n) || !t || !cc_is_half(t->dtype))
            continue;
        int64_t count = cge_shape_numel(&t->shape);
        float *w = malloc(sizeof(float) * (size_t)(count ? count : 1));
        if (!w)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "widen_half: out of memory");
        cge__half_to_f32_n(t->dtype, t->data, w, count);
        cge_tensor wide = {.dtype = CGE_F32, .shape = t->shape, .data = w,
                           .bytes = sizeof(float) * (size_t)count};
        st = cge_node_set_tensor(n, "value", &wide);
        free(w);
    }
    for (int32_t i = 0; !st && i < cge_graph_num_outputs(b); i++) {
        if (!out_half[i])
            continue;
        snprintf(name, sizeof name, "%s", cge_graph_output(b, i));
        int32_t id = cge_graph_value_id(b, name);
        cge_value_kind k = cge_graph_value_kind(b, id);
        if (k == CGE_VALUE_INPUT || k == CGE_VALUE_CONSTANT)
            continue;   /* the body's own half input or constant, as it was */
        cge_node *p = cge_graph_value_producer(b, id);
        if (k != CGE_VALUE_NODE || !p) {
            *ok = false;   /* an outer value, now float32 */
            return CGE_OK;
        }
        if (cc_is_op(p, "Cast") && cge_attrs_get_int(cge_node_attrs_const(p), "to", 0) == half)
            continue;   /* remade already (the value is output twice) */
        int32_t slot = 0;
        while (slot < cge_node_num_outputs(p) && cge_node_output_id(p, slot) != id)
            slot++;
        cge_tensor_desc d;
        st = cge_graph_get_desc(b, name, &d);
        cc_fresh_name(ctx, b, name, fresh, sizeof fresh);
        if (!st)
            st = cge_graph_replace_uses(b, name, fresh);
        if (!st)
            st = cge_node_set_output(p, slot, fresh);
        if (!st)
            st = cc_widen_cast(ctx, b, fresh, name, half, &d.shape);
    }
    return st;
}

/* The body attributes of a control-flow node, and how its bodies' inputs
 * and outputs line up with the node's: body input i is node input i +
 * in_offset (none for If), body output j is node output j - out_offset
 * (Loop's first body output is its condition). */
typedef struct body_layout {
    const char *attrs[2];
    int32_t n_attrs, in_offset, out_offset;
} body_layout;

static bool layout_of(const cge_node *n, int32_t outer_inputs, body_layout *l)
{
    const cge_attrs *a = cge_node_attrs_const(n);
    memset(l, 0, sizeof *l);
    if (cc_is_op(n, "If")) {
        l->attrs[0] = "then_branch";
        l->attrs[1] = "else_branch";
        l->n_attrs = 2;
        l->in_offset = -1;   /* no body inputs */
    } else if (cc_is_op(n, "Loop")) {
        l->attrs[0] = "body";
        l->n_attrs = 1;
        l->out_offset = 1;
    } else if (cc_is_op(n, "Scan")) {
        l->attrs[0] = "body";
        l->n_attrs = 1;
        const cge_graph *body = cge_attrs_get_graph(a, "body");
        /* Scan-8 reads sequence_lens first; later versions do not */
        l->in_offset = body ? cge_node_num_inputs(n) - outer_inputs - cge_graph_num_inputs(body)
                            : -1;
        if (l->in_offset < 0 || l->in_offset > 1)
            return false;
    } else {
        return false;
    }
    for (int32_t k = 0; k < l->n_attrs; k++)
        if (!cge_attrs_get_graph(a, l->attrs[k]))
            return false;
    return true;
}

static int32_t outer_count(const cge_node *n)
{
    const cge_attr *at = cge_attrs_find(cge_node_attrs_const(n), "outer_names");
    int64_t k = at && at->kind == CGE_ATTR_STRINGS ? at->n : 0;
    return k > cge_node_num_inputs(n) ? cge_node_num_inputs(n) : (int32_t)k;
}

/* Whether body `k` of the node can be rewritten, and which of its inputs
 * and outputs are the node's half values. */
static bool body_plan(const cge_graph *g, const cge_node *n, const body_layout *l,
                      const cge_graph *body, cge_dtype half, bool *in_half, bool *out_half)
{
    int32_t bi = cge_graph_num_inputs(body), bo = cge_graph_num_outputs(body);
    if (bi > BODY_MAX_IO || bo > BODY_MAX_IO)
        return false;
    for (int32_t i = 0; i < cge_graph_num_nodes(body); i++) {
        const cge_node *bn = cge_graph_node(body, i);
        if (!cge_node_is_removed(bn) && !body_node_keeps_types(bn))
            return false;
    }
    for (int32_t i = 0; i < bi; i++) {
        cge_tensor_desc d =
            l->in_offset >= 0 ? cc_in_desc(g, n, i + l->in_offset) : (cge_tensor_desc){0};
        in_half[i] = cc_is_half(d.dtype);
        if (in_half[i] && d.dtype != half)
            return false;
    }
    for (int32_t j = 0; j < bo; j++) {
        int32_t o = j - l->out_offset;
        cge_tensor_desc d = o >= 0 && o < cge_node_num_outputs(n) ? cc_out_desc(g, n, o)
                                                                 : (cge_tensor_desc){0};
        out_half[j] = cc_is_half(d.dtype);
        if (out_half[j] && d.dtype != half)
            return false;
    }
    return true;
}

/* Rewritten clones of the node's bodies, or none (all NULL) where the
 * rewrite gives up on any of them. */
static cge_status rewrite_bodies(cc_ctx *ctx, const cge_graph *g, const cge_node *n,
                                 const body_layout *l, cge_dtype half, cge_graph **out)
{
    bool in_half[BODY_MAX_IO], out_half[BODY_MAX_IO], ok = true;
    cge_status st = CGE_OK;
    const cge_attrs *a = cge_node_attrs_const(n);
    for (int32_t k = 0; !st && ok && k < l->n_attrs; k++) {
        const cge_graph *body = cge_attrs_get_graph(a, l->attrs[k]);
        ok = body_plan(g, n, l, body, half, in_half, out_half);
        if (ok)
            st = cge_graph_clone(body, &out[k]);
        if (ok && !st)
            st = rewrite_body(ctx, out[k], in_half, out_half, half, &ok);
    }
    if (st || !ok) {
        for (int32_t k = 0; k < l->n_attrs; k++) {
            cge_graph_destroy(out[k]);
            out[k] = NULL;
        }
    }
    return st;
}

/* The node's meta, with its bodies as they now are and its half outer
 * inputs in float32, gives its outputs their dtypes as before. */
static bool meta_accepts(cc_ctx *ctx, const cge_graph *g, cge_node *n, const bool *outer_half)
{
    int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
    cge_tensor_desc *in = calloc((size_t)(ni + no) + 1, sizeof *in), *out = in ? in + ni : NULL;
    const void **vals = calloc((size_t)ni + 1, sizeof *vals);
    const cge_op_def *def = cc_find_op(ctx, n);
    bool ok = in && vals && def;
    for (int32_t i = 0; ok && i < ni; i++) {
        in[i] = cc_in_desc(g, n, i);
        const cge_tensor *c = cc_input_const(g, n, i);
        vals[i] = c ? c->data : NULL;
        if (outer_half[i]) {
            in[i].dtype = CGE_F32;
            vals[i] = NULL;
        }
    }
    for (int32_t i = 0; ok && i < no; i++)
        out[i] = (cge_tensor_desc){.name = cge_node_output(n, i)};
    if (ok && cge_op_infer(def, cge_node_name(n), cge_node_attrs_const(n), in, vals, NULL, ni, out,
                           no))
        ok = false;
    for (int32_t i = 0; ok && i < no; i++)
        ok = out[i].dtype == cc_out_desc(g, n, i).dtype;
    cge_clear_error();
    free(in);
    free(vals);
    return ok;
}

/* Sets the node's body attributes to `bodies` (copied). */
static cge_status set_bodies(cge_node *n, const body_layout *l, cge_graph *const *bodies)
{
    cge_status st = CGE_OK;
    for (int32_t k = 0; !st && k < l->n_attrs; k++)
        st = cge_node_set_graph(n, l->attrs[k], bodies[k]);
    return st;
}

cge_status cc_widen_half_bodies(cc_ctx *ctx, cge_graph *g, cge_node *n, cc_outer_f32_fn outer_f32,
                                void *user, bool *done)
{
    *done = false;
    int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n), nouter = outer_count(n);
    body_layout l;
    if (cge_node_is_removed(n) || cge_node_domain(n)[0] || ni > BODY_MAX_IO ||
        !layout_of(n, nouter, &l))
        return CGE_OK;
    /* the one half dtype the node's values have */
    cge_dtype half = CGE_DTYPE_UNDEFINED;
    bool outer_half[BODY_MAX_IO] = {false};
    for (int32_t i = 0; i < ni + no; i++) {
        cge_tensor_desc d = i < ni ? cc_in_desc(g, n, i) : cc_out_desc(g, n, i - ni);
        if (!cc_is_half(d.dtype))
            continue;
        if (half != CGE_DTYPE_UNDEFINED && half != d.dtype)
            return CGE_OK;
        half = d.dtype;
        if (i < ni && i >= ni - nouter && d.type == CGE_TYPE_TENSOR)
            outer_half[i] = true;
    }
    if (half == CGE_DTYPE_UNDEFINED)
        return CGE_OK;
    cge_graph *bodies[2] = {NULL, NULL}, *was[2] = {NULL, NULL};
    cge_status st = rewrite_bodies(ctx, g, n, &l, half, bodies);
    if (st || !bodies[0])
        return st;
    const cge_attrs *a = cge_node_attrs_const(n);
    for (int32_t k = 0; !st && k < l.n_attrs; k++)
        st = cge_graph_clone(cge_attrs_get_graph(a, l.attrs[k]), &was[k]);
    if (!st)
        st = set_bodies(n, &l, bodies);
    if (!st && meta_accepts(ctx, g, n, outer_half)) {
        for (int32_t i = 0; !st && i < ni; i++) {
            const char *name = NULL;
            if (outer_half[i] && !(st = outer_f32(user, i, &name)))
                st = cge_node_set_input(n, i, name);
        }
        *done = !st;
    } else if (!st) {
        st = set_bodies(n, &l, was);   /* refused: the bodies as they were */
    }
    for (int32_t k = 0; k < l.n_attrs; k++) {
        cge_graph_destroy(bodies[k]);
        cge_graph_destroy(was[k]);
    }
    return st;
}
