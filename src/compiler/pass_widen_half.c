/* optimize/widen_half: float16 and bfloat16 models computed in float32.
 * Every node of the default domain that reads a half-precision tensor and
 * whose meta accepts float32 there instead (its half outputs then float32
 * too) reads and writes float32: half constants it reads become float32
 * constants now, other half values it reads (graph inputs, the results of
 * nodes left as they are) pass a Cast to float32 first, and where a half
 * value it made is read by a node left as it is or is a graph output, a
 * Cast back to half makes it under its own name. Then inference runs again
 * over the whole graph. */
#include <stdlib.h>
#include <string.h>

#include "base/shared_block.h"
#include "compiler/widen_half.h"
#include "ir/constant_block.h"
#include "ops/half_convert.h"

/* Why: cge's kernels for half tensors are the operators' generic paths, a
 * conversion per element in the inner loops (resnet18 as float16: 13 s a
 * run against 17 ms as float32); the fast kernels (oneDNN convolutions,
 * cge's GEMM, the fusions and channels-last layouts) are float32's. ONNX
 * Runtime's CPU provider does the same (casts around the nodes it has no
 * half kernel for). The values between widened nodes stay float32, so they
 * are not rounded to half between operators: results differ from a
 * computation rounded at every step by that rounding (they are closer to
 * the exact ones), which is why the pass is a level-2 rewrite. Casts the
 * model writes itself (to half) are kept: a value the model rounds, stays
 * rounded. */

/* Nodes never widened themselves: control flow (its bodies are rewritten
 * instead, widen_half_bodies.c),
 * sequences and optionals, nodes whose results may differ per run, and a
 * Cast to text (a half value's shortest digits are not its float32's:
 * 4.2e-06, not 4.172325e-06). */
static bool excluded(const cge_node *n)
{
    if (cge_node_domain(n)[0] || cc_is_nondeterministic(n))
        return true;
    if (cc_is_op(n, "Cast") && cge_attrs_get_int(cge_node_attrs_const(n), "to", 0) == CGE_STRING)
        return true;
    const cge_attrs *a = cge_node_attrs_const(n);
    for (int32_t i = 0; i < cge_attrs_count(a); i++) {
        cge_attr_kind k = cge_attrs_at(a, i)->kind;
        if (k == CGE_ATTR_GRAPH || k == CGE_ATTR_GRAPHS)
            return true;
    }
    return false;
}

#define WIDEN_MAX_IO 16

/* Whether node `n` can run in float32: it reads a half tensor, its meta
 * takes float32 for every half input (values known so far passed, as
 * inference passes them), and then every half output becomes float32 and
 * every other output keeps its dtype. */
static bool widenable(cc_ctx *ctx, const cge_graph *g, const cge_node *n)
{
    int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
    if (cge_node_is_removed(n) || ni > WIDEN_MAX_IO || no > WIDEN_MAX_IO || no == 0 || excluded(n))
        return false;
    cge_tensor_desc in[WIDEN_MAX_IO], out[WIDEN_MAX_IO], was[WIDEN_MAX_IO];
    const void *vals[WIDEN_MAX_IO];
    bool any = false;
    bool known = ctx->known && ctx->known_rev == cge_graph_revision(g);
    cge_dtype half = CGE_DTYPE_UNDEFINED;
    for (int32_t i = 0; i < ni; i++) {
        in[i] = cc_in_desc(g, n, i);
        int32_t id = cge_node_input_id(n, i);
        if (id >= 0 && (!cge_dtype_valid(in[i].dtype) || in[i].type != CGE_TYPE_TENSOR))
            return false;
        const cge_tensor *c = id >= 0 ? cge_graph_value_constant(g, id) : NULL;
        vals[i] = c ? c->data : known && id >= 0 && id < ctx->num_known ? ctx->known[id] : NULL;
        if (cc_is_half(in[i].dtype)) {
            if (half != CGE_DTYPE_UNDEFINED && half != in[i].dtype)
                return false; /* float16 beside bfloat16: left as the model says */
            half = in[i].dtype;
            in[i].dtype = CGE_F32;
            vals[i] = NULL;
            any = true;
        }
    }
    if (!any)
        return false;
    for (int32_t i = 0; i < no; i++) {
        was[i] = cc_out_desc(g, n, i);
        if (was[i].type != CGE_TYPE_TENSOR || (cc_is_half(was[i].dtype) && was[i].dtype != half))
            return false;
        out[i] = (cge_tensor_desc){.name = cge_node_output(n, i)};
    }
    const cge_op_def *def = cc_find_op(ctx, n);
    if (!def) {
        cge_clear_error();
        return false;
    }
    if (cge_op_infer(def, cge_node_name(n), cge_node_attrs_const(n), in, vals, NULL, ni, out, no)) {
        cge_clear_error();
        return false;
    }
    for (int32_t i = 0; i < no; i++)
        if (out[i].dtype != (cc_is_half(was[i].dtype) ? CGE_F32 : was[i].dtype))
            return false;
    return true;
}

cge_status cc_widen_cast(cc_ctx *ctx, cge_graph *g, const char *in, const char *out, cge_dtype to,
                         const cge_shape *shape)
{
    char name[256];
    cge_node *c = NULL;
    cc_fresh_name(ctx, g, "widen_half_cast", name, sizeof name);
    cge_status st = cge_graph_add_node(g, "Cast", "", name, &in, 1, &out, 1, &c);
    if (!st)
        st = cge_node_set_int(c, "to", to);
    if (!st)
        st = cge_graph_set_desc(g, out, to, shape);
    if (!st)
        ctx->added++;
    return st;
}

cge_status cc_widen_constant(cc_ctx *ctx, cge_graph *g, const char *name, const cge_tensor *t,
                             char *buf, size_t size)
{
    int64_t n = cge_shape_numel(&t->shape);
    size_t bytes = (size_t)n * sizeof(float);
    float *d = cge__block_new(NULL, bytes);   /* written whole now, in order */
    if (!d)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "widen_half: out of memory for %s",
                         name);
    cge__half_to_f32_n(t->dtype, t->data, d, n);
    cc_fresh_name(ctx, g, name, buf, size);
    return cge__graph_add_constant_block(g, buf, CGE_F32, &t->shape, d, bytes);
}

/* Whether every node reading `id` is widened. */
static bool all_readers_wide(const cc_uses *u, int32_t id, const bool *wide, cge_status *st)
{
    int32_t nu = cc_uses_count(u, id);
    cc_use small[16], *us = nu > 16 ? malloc(sizeof *us * (size_t)nu) : small;
    if (!us) {
        *st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "widen_half: out of memory");
        return false;
    }
    int32_t got = cc_uses_list(u, id, us, nu);
    bool all = true;
    for (int32_t q = 0; q < got && all; q++)
        all = wide[cge_node_index(us[q].node)];
    if (us != small)
        free(us);
    return all;
}

/* What the pass knows of the graph as it rewrites it. */
typedef struct widen_state {
    cc_ctx *ctx;
    cge_graph *g;
    int32_t nv;           /* values before the rewrite */
    char **f32_name;      /* value id -> its float32 form, once made */
    cge_dtype *dtype;     /* value id -> dtype before the rewrite */
    cge_shape *shapes;
    cge_node *node;       /* the control-flow node whose outer inputs are asked for */
} widen_state;

/* The float32 form of half value `id`: the widened node's fresh result, a
 * widened constant, or a Cast of the value, made once. */
static cge_status f32_form(widen_state *w, int32_t id)
{
    if (w->f32_name[id])
        return CGE_OK;
    char name[256], v[256];
    const cge_tensor *c = cge_graph_value_constant(w->g, id);
    snprintf(v, sizeof v, "%s", cge_graph_value_name(w->g, id));
    cge_status st;
    if (c && c->data) {
        st = cc_widen_constant(w->ctx, w->g, v, c, name, sizeof name);
    } else {
        cc_fresh_name(w->ctx, w->g, v, name, sizeof name);
        st = cc_widen_cast(w->ctx, w->g, v, name, CGE_F32, &w->shapes[id]);
    }
    if (!st && !(w->f32_name[id] = strdup(name)))
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "widen_half: out of memory");
    return st;
}

static cge_status outer_f32(void *user, int32_t slot, const char **name)
{
    widen_state *w = user;
    int32_t id = cge_node_input_id(w->node, slot);
    if (id < 0 || id >= w->nv || !cc_is_half(w->dtype[id]))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL,
                         "widen_half: '%s' input %d is not a half value", cge_node_name(w->node),
                         (int)slot);
    cge_status st = f32_form(w, id);
    *name = st ? NULL : w->f32_name[id];
    return st;
}

/* Nodes holding bodies (widen_half_bodies.c says which it rewrites). */
static bool has_body(const cge_node *n)
{
    const cge_attrs *a = cge_node_attrs_const(n);
    for (int32_t i = 0; !cge_node_is_removed(n) && i < cge_attrs_count(a); i++)
        if (cge_attrs_at(a, i)->kind == CGE_ATTR_GRAPH)
            return true;
    return false;
}

cge_status cc_pass_widen_half(cc_ctx *ctx, cge_graph *g)
{
    int32_t nn = cge_graph_num_nodes(g), nv = cge_graph_num_values(g);
    bool any_half = false;
    for (int32_t id = 0; id < nv && !any_half; id++) {
        cge_tensor_desc d;
        any_half = !cge_graph_value_desc(g, id, &d) && cc_is_half(d.dtype);
    }
    if (!any_half)
        return CGE_OK;
    bool *wide = calloc((size_t)nn + 1, sizeof *wide);
    widen_state w = {.ctx = ctx, .g = g, .nv = nv,
                     .f32_name = calloc((size_t)nv + 1, sizeof(char *)),
                     .dtype = calloc((size_t)nv + 1, sizeof(cge_dtype))};
    cc_uses u = {0};
    cge_status st = wide && w.f32_name && w.dtype ? cc_uses_build(&u, g)
                                                  : cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY,
                                                              "widen_half: out of memory");
    int32_t widened = 0, bodies = 0;
    for (int32_t i = 0; !st && i < nn; i++) {
        if ((wide[i] = widenable(ctx, g, cge_graph_node(g, i))))
            widened++;
        bodies += has_body(cge_graph_node(g, i));
    }
    if (!st && (widened || bodies)) {
        w.shapes = calloc((size_t)nv + 1, sizeof *w.shapes);
        if (!w.shapes)
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "widen_half: out of memory");
    }
    for (int32_t id = 0; !st && w.shapes && id < nv; id++) {
        cge_tensor_desc d;
        if (!cge_graph_value_desc(g, id, &d)) {
            w.dtype[id] = d.dtype;
            w.shapes[id] = d.shape;
        }
    }
    /* Half results of widened nodes: the node makes a fresh float32 value,
     * and a Cast remakes the half one under its name where something
     * else reads it. */
    for (int32_t i = 0; !st && widened && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        for (int32_t k = 0; wide[i] && !st && k < cge_node_num_outputs(n); k++) {
            int32_t id = cge_node_output_id(n, k);
            if (id < 0 || !cc_is_half(w.dtype[id]))
                continue;
            bool half_read =
                cge_graph_value_is_output(g, id) || !all_readers_wide(&u, id, wide, &st);
            if (st)
                break;
            char fresh[256], old[256];
            snprintf(old, sizeof old, "%s", cge_graph_value_name(g, id));
            cc_fresh_name(ctx, g, old, fresh, sizeof fresh);
            st = cge_node_set_output(n, k, fresh);
            if (!st)
                st = cge_graph_set_desc(g, fresh, CGE_F32, &w.shapes[id]);
            if (!st && !(w.f32_name[id] = strdup(fresh)))
                st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "widen_half: out of memory");
            if (!st && half_read)
                st = cc_widen_cast(ctx, g, fresh, old, w.dtype[id], &w.shapes[id]);
        }
    }
    /* Half operands of widened nodes read their float32 forms. */
    for (int32_t i = 0; !st && widened && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        for (int32_t s = 0; wide[i] && !st && s < cge_node_num_inputs(n); s++) {
            int32_t id = cge_node_input_id(n, s);
            if (id < 0 || id >= nv || !cc_is_half(w.dtype[id]))
                continue;
            st = f32_form(&w, id);
            if (!st)
                st = cge_node_set_input(n, s, w.f32_name[id]);
        }
    }
    /* Control flow computes its bodies in float32. */
    int32_t rewritten = 0;
    for (int32_t i = 0; !st && bodies && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        bool done = false;
        if (!has_body(n))
            continue;
        w.node = n;
        st = cc_widen_half_bodies(ctx, g, n, outer_f32, &w, &done);
        rewritten += done;
    }
    if (!st && (widened || rewritten)) {
        ctx->fused += widened + rewritten;
        st = cc_pass_infer(ctx, g);
    }
    cc_uses_free(&u);
    for (int32_t id = 0; w.f32_name && id < nv; id++)
        free(w.f32_name[id]);
    free(w.f32_name);
    free(w.dtype);
    free(w.shapes);
    free(wide);
    return st;
}
