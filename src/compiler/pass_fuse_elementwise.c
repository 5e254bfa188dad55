/* optimize/fuse_elementwise: trees of float32 elementwise nodes joined by
 * single-use edges become one cge.fused ElementwiseChain. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

/* The chain reads each outside input once and writes the tree's result once
 * instead of a buffer per node. Inputs must have the result's shape or one
 * element (no other broadcasting). The chain's kernel uses the unfused
 * kernels' expressions, so results are bit-identical. */

#define MAX_NODES 40
#define MAX_INPUTS CGE_EW_MAX_INPUTS

typedef struct ew_map {
    const char *op;
    cge_ew_op code;
    int arity;
} ew_map;

static const ew_map ops[] = {
    {"Add", CGE_EW_ADD, 2}, {"Sub", CGE_EW_SUB, 2}, {"Mul", CGE_EW_MUL, 2}, {"Div", CGE_EW_DIV, 2},
    {"Neg", CGE_EW_NEG, 1}, {"Abs", CGE_EW_ABS, 1}, {"Exp", CGE_EW_EXP, 1}, {"Log", CGE_EW_LOG, 1},
    {"Sqrt", CGE_EW_SQRT, 1}, {"Reciprocal", CGE_EW_RECIP, 1}, {"Relu", CGE_EW_RELU, 1},
    {"LeakyRelu", CGE_EW_LEAKY, 1}, {"Sigmoid", CGE_EW_SIGMOID, 1}, {"Tanh", CGE_EW_TANH, 1},
    {"Erf", CGE_EW_ERF, 1}, {"Gelu", CGE_EW_GELU, 1}, {"Identity", CGE_EW_COPY, 1},
    {"Clip", CGE_EW_CLIP, 1},
};

static const ew_map *lookup(const cge_node *n)
{
    if (cge_node_domain(n)[0])
        return NULL;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(cge_node_op_type(n), ops[i].op))
            return &ops[i];
    return NULL;
}

/* Clip's bounds: constant inputs 1 and 2 (absent: unbounded). */
static bool clip_bounds(const cge_graph *g, const cge_node *n, float *lo, float *hi)
{
    *lo = -INFINITY;
    *hi = INFINITY;
    for (int32_t i = 1; i < cge_node_num_inputs(n) && i < 3; i++) {
        if (cge_node_input_id(n, i) < 0)
            continue;
        const cge_tensor *t = cc_input_const(g, n, i);
        double v;
        if (!t || t->dtype != CGE_F32 || !cc_const_scalar(t, &v))
            return false;
        *(i == 1 ? lo : hi) = (float)v;
    }
    return cge_node_num_inputs(n) <= 3;
}

static bool fusable(const cge_graph *g, const cge_node *n)
{
    const ew_map *m = lookup(n);
    if (!m || cge_node_num_outputs(n) != 1)
        return false;
    bool clip = m->code == CGE_EW_CLIP;
    if (!clip && cge_node_num_inputs(n) != m->arity)
        return false;
    cge_tensor_desc o = cc_out_desc(g, n, 0);
    if (o.dtype != CGE_F32)
        return false;
    /* Symbolic dims (batch, sequence) are fine where every operand has the
     * same ones; an unknown -1 dim could be anything. */
    for (int32_t i = 0; i < o.shape.rank; i++)
        if (o.shape.dims[i] == CGE_DIM_DYNAMIC)
            return false;
    if (cge_shape_is_static(&o.shape) && cge_shape_numel(&o.shape) <= 1)
        return false;
    if (clip) {
        float lo, hi;
        if (!clip_bounds(g, n, &lo, &hi))
            return false;
    }
    if (m->code == CGE_EW_GELU) {
        const char *ap = cge_attrs_get_string(cge_node_attrs_const(n), "approximate", "none");
        if (strcmp(ap, "none") && strcmp(ap, "tanh"))
            return false;
    }
    for (int32_t i = 0; i < (clip ? 1 : m->arity); i++) {
        cge_tensor_desc d = cc_in_desc(g, n, i);
        if (d.dtype != CGE_F32 || cge_node_input_id(n, i) < 0)
            return false;
        if (!cge_shape_equal(&d.shape, &o.shape) && cge_shape_numel(&d.shape) != 1)
            return false;
    }
    return true;
}

static int32_t find(int32_t *parent, int32_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static int32_t arity_of(const cge_node *n)
{
    const ew_map *m = lookup(n);
    return m->code == CGE_EW_CLIP ? 1 : m->arity;
}

typedef struct group_build {
    const char *inputs[MAX_INPUTS];
    int32_t input_ids[MAX_INPUTS];
    int32_t num_inputs;
    int64_t prog[MAX_NODES * 4];
    int32_t num_instr;
    float imm[CGE_EW_MAX_IMM];
    int32_t num_imm;
} group_build;

static int32_t reg_of(group_build *b, const int32_t *reg_by_member_out, const cge_graph *g,
                      int32_t id, cge_node *const *members, int32_t nm)
{
    for (int32_t m = 0; m < nm; m++)
        if (cge_node_output_id(members[m], 0) == id)
            return reg_by_member_out[m];
    for (int32_t i = 0; i < b->num_inputs; i++)
        if (b->input_ids[i] == id)
            return i;
    return -1;
}

/* Emit the fused node for members (topological order; the last is the root). */
static cge_status emit(cc_ctx *ctx, cge_graph *g, cge_node **members, int32_t nm)
{
    group_build b;
    memset(&b, 0, sizeof b);
    /* Outside inputs first: they are registers 0 .. k-1. */
    for (int32_t m = 0; m < nm; m++) {
        for (int32_t i = 0; i < arity_of(members[m]); i++) {
            int32_t id = cge_node_input_id(members[m], i);
            bool inside = false, seen = false;
            for (int32_t q = 0; q < nm && !inside; q++)
                inside = cge_node_output_id(members[q], 0) == id;
            for (int32_t q = 0; q < b.num_inputs && !seen; q++)
                seen = b.input_ids[q] == id;
            if (inside || seen)
                continue;
            if (b.num_inputs == MAX_INPUTS)
                return CGE_OK; /* too wide after all: leave it unfused */
            b.input_ids[b.num_inputs] = id;
            b.inputs[b.num_inputs++] = cge_graph_value_name(g, id);
        }
    }
    if (b.num_inputs + nm > CGE_EW_MAX_REGS)
        return CGE_OK;
    int32_t reg[MAX_NODES];
    for (int32_t m = 0; m < nm; m++) {
        const ew_map *mp = lookup(members[m]);
        int64_t *q = &b.prog[4 * m];
        q[0] = mp->code;
        q[1] = b.num_inputs + m;
        q[2] = reg_of(&b, reg, g, cge_node_input_id(members[m], 0), members, m);
        q[3] = mp->arity == 2 ? reg_of(&b, reg, g, cge_node_input_id(members[m], 1), members, m) : 0;
        if (mp->code == CGE_EW_GELU &&
            !strcmp(cge_attrs_get_string(cge_node_attrs_const(members[m]), "approximate", "none"),
                    "tanh"))
            q[0] = CGE_EW_GELU_TANH;
        if (mp->code == CGE_EW_LEAKY) {
            if (b.num_imm + 1 > CGE_EW_MAX_IMM)
                return CGE_OK;
            q[3] = b.num_imm;
            b.imm[b.num_imm++] = cge_attrs_get_float(cge_node_attrs_const(members[m]), "alpha", 0.01f);
        }
        if (mp->code == CGE_EW_CLIP) {
            if (b.num_imm + 2 > CGE_EW_MAX_IMM)
                return CGE_OK;
            q[3] = b.num_imm;
            clip_bounds(g, members[m], &b.imm[b.num_imm], &b.imm[b.num_imm + 1]);
            b.num_imm += 2;
        }
        if (q[2] < 0 || q[3] < 0)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL,
                             "fuse_elementwise: operand of '%s' not found", cge_node_name(members[m]));
        reg[m] = (int32_t)q[1];
    }
    b.num_instr = nm;
    cge_node *root = members[nm - 1];
    char name[256];
    const char *out = cge_graph_value_name(g, cge_node_output_id(root, 0));
    cc_fresh_name(ctx, g, cge_node_name(root), name, sizeof name);
    const char *inputs[MAX_INPUTS];
    memcpy(inputs, b.inputs, sizeof inputs);
    cge_status st = CGE_OK;
    for (int32_t m = 0; !st && m < nm; m++)
        st = cge_graph_remove_node(g, members[m]);
    cge_node *f = NULL;
    if (!st)
        st = cge_graph_add_node(g, "ElementwiseChain", CGE_DOMAIN_FUSED, name, inputs, b.num_inputs,
                                &out, 1, &f);
    int64_t out_reg = b.num_inputs + nm - 1;
    if (!st)
        st = cge_node_set_ints(f, "program", b.prog, 4 * (int64_t)nm);
    if (!st)
        st = cge_node_set_ints(f, "out_regs", &out_reg, 1);
    if (!st && b.num_imm)
        st = cge_node_set_floats(f, "imm", b.imm, b.num_imm);
    if (!st) {
        ctx->fused += nm;
        ctx->removed += nm;
        ctx->added++;
    }
    return st;
}

cge_status cc_pass_fuse_elementwise(cc_ctx *ctx, cge_graph *g)
{
    int32_t nn = cge_graph_num_nodes(g);
    size_t sz = (size_t)(nn ? nn : 1);
    int32_t *order = malloc(sizeof(int32_t) * sz), *parent = malloc(sizeof(int32_t) * sz);
    int32_t *size = malloc(sizeof(int32_t) * sz), *width = malloc(sizeof(int32_t) * sz);
    int32_t *pos = malloc(sizeof(int32_t) * sz);
    bool *ok = calloc(sz, sizeof(bool));
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    if (!st && (!order || !parent || !size || !width || !ok || !pos))
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "fuse_elementwise: out of memory");
    if (!st)
        st = cge_graph_topo_order(g, order);
    for (int32_t k = 0; !st && k < nn; k++) {
        int32_t i = order[k];
        cge_node *n = cge_graph_node(g, i);
        pos[i] = k;
        parent[i] = i;
        size[i] = 1;
        width[i] = 0;
        ok[i] = fusable(g, n);
        if (!ok[i])
            continue;
        width[i] = arity_of(n);
        cge_tensor_desc o = cc_out_desc(g, n, 0);
        for (int32_t in = 0; in < arity_of(n); in++) {
            int32_t id = cge_node_input_id(n, in);
            cge_node *p = cge_graph_value_producer(g, id);
            if (!p || !ok[cge_node_index(p)] || cge_graph_value_is_output(g, id) ||
                cc_uses_count(&u, id) != 1)
                continue;
            cge_tensor_desc po = cc_out_desc(g, p, 0);
            if (!cge_shape_equal(&po.shape, &o.shape))
                continue;
            int32_t a = find(parent, cge_node_index(p)), b = find(parent, i);
            if (a == b)
                continue;
            /* Each merge turns one outside input into an inside edge. */
            int32_t nsize = size[a] + size[b], nwidth = width[a] + width[b] - 1;
            if (nsize > MAX_NODES || nwidth > MAX_INPUTS || nwidth + nsize > CGE_EW_MAX_REGS)
                continue;
            parent[a] = b;
            size[b] = nsize;
            width[b] = nwidth;
        }
    }
    /* Members of each group in topological order: bucket by root. */
    int32_t *head = NULL, *next = NULL;
    if (!st) {
        head = malloc(sizeof(int32_t) * sz);
        next = malloc(sizeof(int32_t) * sz);
        if (!head || !next)
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "fuse_elementwise: out of memory");
    }
    if (!st) {
        for (int32_t i = 0; i < nn; i++)
            head[i] = -1;
        for (int32_t k = nn - 1; k >= 0; k--) {
            int32_t i = order[k];
            if (!ok[i])
                continue;
            int32_t r = find(parent, i);
            next[i] = head[r];
            head[r] = i;
        }
    }
    for (int32_t k = 0; !st && k < nn; k++) {
        int32_t r = order[k];
        if (!ok[r] || find(parent, r) != r || size[r] < 2)
            continue;
        cge_node *members[MAX_NODES];
        int32_t nm = 0;
        for (int32_t i = head[r]; i >= 0 && nm < MAX_NODES; i = next[i])
            members[nm++] = cge_graph_node(g, i);
        st = emit(ctx, g, members, nm);
    }
    free(head);
    free(next);
    free(order);
    free(parent);
    free(size);
    free(width);
    free(pos);
    free(ok);
    cc_uses_free(&u);
    return st;
}
