/* prepare/fold_sequences: sequences whose elements are known at compile time
 * (SequenceConstruct, SequenceEmpty, SequenceInsert/Erase at constant
 * positions, SplitToSequence of a static axis) become their tensors, so that
 * the fast path (plan, replay) sees plain tensors instead of a node-by-node run. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* The most elements a folded sequence may have (a Split with more outputs
 * than this would be a larger graph than the run it saves). */
#define MAX_ELEMS 256

/* What a sequence value is known to hold: the ids of its element tensors. */
typedef struct known_seq {
    int32_t n;          /* -1: unknown */
    int32_t *ids;
} known_seq;

typedef struct fold {
    cc_ctx *ctx;
    cge_graph *g;
    known_seq *k;       /* per value id (ids added by the pass are unknown) */
    int32_t num_ids;
    int32_t changed;
} fold;

static known_seq *known_of(fold *f, int32_t id)
{
    return id >= 0 && id < f->num_ids && f->k[id].n >= 0 ? &f->k[id] : NULL;
}

static cge_status oom(void)
{
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "fold_sequences: out of memory");
}

/* Element list `ids` (n of them) for value `id`; copies. */
static cge_status set_known(fold *f, int32_t id, const int32_t *ids, int32_t n)
{
    if (id < 0 || id >= f->num_ids || n > MAX_ELEMS)
        return CGE_OK;
    int32_t *c = malloc(sizeof *c * (size_t)(n + 1));
    if (!c)
        return oom();
    if (n)
        memcpy(c, ids, sizeof *c * (size_t)n);
    free(f->k[id].ids);
    f->k[id] = (known_seq){.n = n, .ids = c};
    return CGE_OK;
}

/* A constant scalar index input (int32/int64); false if absent or not constant. */
static bool const_index(const cge_graph *g, const cge_node *n, int32_t i, int64_t *out)
{
    if (i >= cge_node_num_inputs(n) || cge_node_input_id(n, i) < 0)
        return false;
    const cge_tensor *t = cc_input_const(g, n, i);
    if (!t || cge_shape_numel(&t->shape) != 1)
        return false;
    if (t->dtype == CGE_I64)
        *out = *(const int64_t *)t->data;
    else if (t->dtype == CGE_I32)
        *out = *(const int32_t *)t->data;
    else
        return false;
    return true;
}

static const char *name_of(const fold *f, int32_t id) { return cge_graph_value_name(f->g, id); }

/* Node `n` (one output) is replaced by op(inputs) producing the same name. */
static cge_status replace_node(fold *f, cge_node *n, const char *op, const char *const *ins,
                               int32_t ni, cge_node **made)
{
    char out[512], nm[512];
    snprintf(out, sizeof out, "%s", cge_node_output(n, 0));
    snprintf(nm, sizeof nm, "%s", cge_node_name(n));
    cge_status st = cge_graph_remove_node(f->g, n);
    const char *outs[1] = {out};
    if (!st)
        st = cge_graph_add_node(f->g, op, "", nm, ins, ni, outs, 1, made);
    f->changed++;
    return st;
}

static cge_status add_int_const(fold *f, const char *prefix, const int64_t *v, int64_t n,
                                bool scalar, char *buf, size_t size)
{
    cge_shape s = scalar ? CGE_SCALAR : CGE_SHAPE(n);
    return cc_add_const(f->ctx, f->g, prefix, CGE_I64, &s, v, buf, size);
}

/* SplitToSequence of a static axis: a Split (and Squeezes without keepdims). */
static cge_status fold_split(fold *f, cge_node *n)
{
    cge_tensor_desc x = cc_in_desc(f->g, n, 0);
    if (x.type != CGE_TYPE_TENSOR || x.shape.rank < 1 || !cge_dtype_valid(x.dtype))
        return CGE_OK;
    const cge_attrs *a = cge_node_attrs_const(n);
    int32_t axis = 0;
    if (!cge_axis_normalize(cge_attrs_get_int(a, "axis", 0), x.shape.rank, false, &axis))
        return CGE_OK;
    int64_t len = x.shape.dims[axis];
    if (len < 1)
        return CGE_OK;
    bool has_split = cge_node_num_inputs(n) > 1 && cge_node_input_id(n, 1) >= 0;
    int64_t sizes[MAX_ELEMS];
    int64_t cnt = 0;
    if (!has_split) {
        cnt = len;
        for (int64_t i = 0; i < cnt && i < MAX_ELEMS; i++)
            sizes[i] = 1;
    } else {
        const cge_tensor *t = cc_input_const(f->g, n, 1);
        if (!t || (t->dtype != CGE_I64 && t->dtype != CGE_I32))
            return CGE_OK;
        int64_t k = 0;
        if (t->shape.rank == 0) {
            k = t->dtype == CGE_I64 ? *(const int64_t *)t->data : *(const int32_t *)t->data;
            if (k <= 0)
                return CGE_OK;   /* the run reports it */
            cnt = (len + k - 1) / k;
            for (int64_t i = 0; i < cnt && i < MAX_ELEMS; i++)
                sizes[i] = i + 1 < cnt ? k : len - k * (cnt - 1);
        } else {
            cnt = cge_shape_numel(&t->shape);
            int64_t sum = 0;
            for (int64_t i = 0; i < cnt && i < MAX_ELEMS; i++) {
                sizes[i] = t->dtype == CGE_I64 ? ((const int64_t *)t->data)[i]
                                               : ((const int32_t *)t->data)[i];
                if (sizes[i] < 0)
                    return CGE_OK;
                sum += sizes[i];
            }
            if (sum != len)
                return CGE_OK;
        }
    }
    if (cnt < 1 || cnt > MAX_ELEMS)
        return CGE_OK;
    bool squeeze = !has_split && cge_attrs_get_int(a, "keepdims", 1) == 0;
    char split_c[256], axes_c[256], base[300];
    snprintf(base, sizeof base, "%s/split", cge_node_name(n));
    cge_status st = add_int_const(f, base, sizes, cnt, false, split_c, sizeof split_c);
    int64_t ax = axis;
    if (!st && squeeze)
        st = add_int_const(f, base, &ax, 1, false, axes_c, sizeof axes_c);
    char (*names)[256] = calloc((size_t)cnt, sizeof *names);
    char (*sq)[256] = calloc((size_t)cnt, sizeof *sq);
    const char **outs = calloc((size_t)cnt, sizeof *outs);
    int32_t *ids = calloc((size_t)cnt, sizeof *ids);
    if (!names || !sq || !outs || !ids)
        st = oom();
    /* fresh names are unique by their counter, before the values exist */
    for (int64_t i = 0; !st && i < cnt; i++) {
        cc_fresh_name(f->ctx, f->g, base, names[i], sizeof names[i]);
        outs[i] = names[i];
    }
    cge_graph *g = f->g;
    cge_node *sp = NULL;
    if (!st) {
        const char *ins[2] = {name_of(f, cge_node_input_id(n, 0)), split_c};
        char nm[300];
        snprintf(nm, sizeof nm, "%s/split", cge_node_name(n));
        st = cge_graph_add_node(g, "Split", "", cc_fresh_name(f->ctx, g, nm, base, sizeof base),
                                ins, 2, outs, (int32_t)cnt, &sp);
    }
    if (!st)
        st = cge_node_set_int(sp, "axis", axis);
    for (int64_t i = 0; !st && i < cnt; i++) {
        int32_t id = cge_graph_value_id(g, names[i]);
        if (squeeze) {
            const char *ins[2] = {names[i], axes_c};
            char nm[300];
            snprintf(nm, sizeof nm, "%s/squeeze", cge_node_name(n));
            cc_fresh_name(f->ctx, g, nm, sq[i], sizeof sq[i]);
            const char *o[1] = {sq[i]};
            st = cge_graph_add_node(g, "Squeeze", "", sq[i], ins, 2, o, 1, NULL);
            id = cge_graph_value_id(g, sq[i]);
        }
        ids[i] = id;
    }
    free(sq);
    if (!st)
        st = set_known(f, cge_node_output_id(n, 0), ids, (int32_t)cnt);
    free(names);
    free(outs);
    free(ids);
    if (!st)
        f->changed++;
    return st;
}

/* SequenceAt(SplitToSequence(x) into pieces of one, i) with i known only at
 * run time: element i is Gather(x, i) along the axis (keepdims=0), or with
 * i as a one-element vector (keepdims=1, the axis kept at length 1), so a
 * loop reading one row per iteration never builds the sequence. */
static cge_status fold_at_of_split(fold *f, cge_node *n)
{
    cge_graph *g = f->g;
    if (cge_node_num_inputs(n) < 2 || cge_node_input_id(n, 1) < 0)
        return CGE_OK;
    const cge_node *sp = cge_graph_producer(g, cge_node_input(n, 0));
    if (!sp || cge_node_is_removed(sp) || !cc_is_op(sp, "SplitToSequence") ||
        cge_node_domain(sp)[0] ||
        (cge_node_num_inputs(sp) > 1 && cge_node_input_id(sp, 1) >= 0))
        return CGE_OK;
    cge_tensor_desc x = cc_in_desc(g, sp, 0), ix = cc_in_desc(g, n, 1);
    const cge_attrs *a = cge_node_attrs_const(sp);
    int32_t axis = 0;
    if (x.type != CGE_TYPE_TENSOR || x.shape.rank < 1 ||
        !cge_axis_normalize(cge_attrs_get_int(a, "axis", 0), x.shape.rank, false, &axis) ||
        ix.type != CGE_TYPE_TENSOR || (ix.dtype != CGE_I64 && ix.dtype != CGE_I32) ||
        ix.shape.rank > 1 || (ix.shape.rank == 1 && ix.shape.dims[0] != 1))
        return CGE_OK;
    bool keep = cge_attrs_get_int(a, "keepdims", 1) != 0;
    char idx[512], shp[256];
    snprintf(idx, sizeof idx, "%s", cge_node_input(n, 1));
    if (keep || ix.shape.rank == 1) {
        /* keepdims: a [1] index keeps the axis; otherwise a scalar drops it */
        int64_t one = 1;
        cge_status st = keep ? add_int_const(f, cge_node_name(n), &one, 1, false, shp, sizeof shp)
                             : add_int_const(f, cge_node_name(n), &one, 0, false, shp, sizeof shp);
        char nm[300], out[512];
        snprintf(nm, sizeof nm, "%s/index", cge_node_name(n));
        if (!st)
            cc_fresh_name(f->ctx, g, nm, out, sizeof out);
        const char *ri[2] = {idx, shp}, *ro[1] = {out};
        if (!st)
            st = cge_graph_add_node(g, "Reshape", "", out, ri, 2, ro, 1, NULL);
        if (st)
            return st;
        snprintf(idx, sizeof idx, "%s", out);
    }
    char xn[512];
    snprintf(xn, sizeof xn, "%s", cge_node_input(sp, 0));
    const char *gi[2] = {xn, idx};
    cge_node *gn = NULL;
    cge_status st = replace_node(f, n, "Gather", gi, 2, &gn);
    return st ? st : cge_node_set_int(gn, "axis", axis);
}

static cge_status visit(fold *f, cge_node *n)
{
    if (cge_node_domain(n)[0])
        return CGE_OK;
    cge_graph *g = f->g;
    int32_t out = cge_node_num_outputs(n) ? cge_node_output_id(n, 0) : -1;
    if (cc_is_op(n, "SequenceEmpty"))
        return set_known(f, out, NULL, 0);
    if (cc_is_op(n, "SequenceConstruct")) {
        int32_t ids[MAX_ELEMS], ni = cge_node_num_inputs(n);
        if (ni > MAX_ELEMS)
            return CGE_OK;
        for (int32_t i = 0; i < ni; i++)
            ids[i] = cge_node_input_id(n, i);
        return set_known(f, out, ids, ni);
    }
    if (cc_is_op(n, "SplitToSequence"))
        return fold_split(f, n);
    if (cc_is_op(n, "SequenceAt")) {
        int64_t p = 0;
        if (!const_index(g, n, 1, &p))
            return fold_at_of_split(f, n);
    }
    known_seq *s = known_of(f, cge_node_num_inputs(n) ? cge_node_input_id(n, 0) : -1);
    if (!s)
        return CGE_OK;
    int32_t ids[MAX_ELEMS + 1];
    int64_t pos = 0;
    if (cc_is_op(n, "Identity"))
        return set_known(f, out, s->ids, s->n);
    if (cc_is_op(n, "SequenceInsert")) {
        bool has_pos = cge_node_num_inputs(n) > 2 && cge_node_input_id(n, 2) >= 0;
        if (has_pos && !const_index(g, n, 2, &pos))
            return CGE_OK;
        if (!has_pos)
            pos = s->n;
        if (pos < -s->n || pos > s->n || s->n >= MAX_ELEMS)
            return CGE_OK;   /* the run reports it */
        if (pos < 0)
            pos += s->n;
        memcpy(ids, s->ids, sizeof *ids * (size_t)pos);
        ids[pos] = cge_node_input_id(n, 1);
        memcpy(ids + pos + 1, s->ids + pos, sizeof *ids * (size_t)(s->n - pos));
        return set_known(f, out, ids, s->n + 1);
    }
    if (cc_is_op(n, "SequenceErase")) {
        bool has_pos = cge_node_num_inputs(n) > 1 && cge_node_input_id(n, 1) >= 0;
        if (has_pos && !const_index(g, n, 1, &pos))
            return CGE_OK;
        if (!has_pos)
            pos = -1;
        if (pos < -s->n || pos >= s->n)
            return CGE_OK;
        if (pos < 0)
            pos += s->n;
        memcpy(ids, s->ids, sizeof *ids * (size_t)pos);
        memcpy(ids + pos, s->ids + pos + 1, sizeof *ids * (size_t)(s->n - pos - 1));
        return set_known(f, out, ids, s->n - 1);
    }
    if (cc_is_op(n, "SequenceAt")) {
        if (!const_index(g, n, 1, &pos) || pos < -s->n || pos >= s->n)
            return CGE_OK;
        const char *in[1] = {name_of(f, s->ids[pos < 0 ? pos + s->n : pos])};
        return replace_node(f, n, "Identity", in, 1, NULL);
    }
    if (cc_is_op(n, "SequenceLength")) {
        char c[256];
        int64_t len = s->n;
        cge_status st = add_int_const(f, cge_node_name(n), &len, 1, true, c, sizeof c);
        const char *in[1] = {c};
        return st ? st : replace_node(f, n, "Identity", in, 1, NULL);
    }
    if (cc_is_op(n, "ConcatFromSequence") && s->n > 0) {
        const cge_attrs *a = cge_node_attrs_const(n);
        const cge_attr *ax = cge_attrs_find(a, "axis");
        if (!ax || ax->kind != CGE_ATTR_INT)
            return CGE_OK;
        bool stack = cge_attrs_get_int(a, "new_axis", 0) != 0;
        const char *ins[MAX_ELEMS];
        char (*un)[256] = stack ? calloc((size_t)s->n, sizeof *un) : NULL;
        char axes_c[256];
        cge_status st = stack && !un ? oom() : CGE_OK;
        if (!st && stack)
            st = add_int_const(f, cge_node_name(n), &ax->i, 1, false, axes_c, sizeof axes_c);
        for (int32_t i = 0; !st && i < s->n; i++) {
            ins[i] = name_of(f, s->ids[i]);
            if (!stack)
                continue;
            char nm[300];
            snprintf(nm, sizeof nm, "%s/unsqueeze", cge_node_name(n));
            cc_fresh_name(f->ctx, g, nm, un[i], sizeof un[i]);
            const char *ui[2] = {ins[i], axes_c}, *uo[1] = {un[i]};
            st = cge_graph_add_node(g, "Unsqueeze", "", un[i], ui, 2, uo, 1, NULL);
            ins[i] = un[i];
        }
        cge_node *c = NULL;
        if (!st)
            st = replace_node(f, n, "Concat", ins, s->n, &c);
        if (!st)
            st = cge_node_set_int(c, "axis", ax->i);
        free(un);
        return st;
    }
    return CGE_OK;
}

/* Nodes whose outputs nothing reads, that make sequences or only read them
 * (what folding left behind): removed until none is left. */
static cge_status drop_dead(fold *f)
{
    cge_graph *g = f->g;
    for (int round = 0; round < 64; round++) {
        int32_t nv = cge_graph_num_values(g);
        int32_t *uses = calloc((size_t)nv + 1, sizeof *uses);
        if (!uses)
            return oom();
        for (int32_t i = 0; i < cge_graph_num_nodes(g); i++) {
            const cge_node *n = cge_graph_node(g, i);
            for (int32_t k = 0; !cge_node_is_removed(n) && k < cge_node_num_inputs(n); k++)
                if (cge_node_input_id(n, k) >= 0)
                    uses[cge_node_input_id(n, k)]++;
        }
        bool any = false;
        for (int32_t i = 0; i < cge_graph_num_nodes(g); i++) {
            cge_node *n = cge_graph_node(g, i);
            if (cge_node_is_removed(n) || cge_node_domain(n)[0] ||
                strncmp(cge_node_op_type(n), "Sequence", 8) != 0 ||
                cc_is_op(n, "SequenceMap"))
                continue;
            bool dead = true;
            for (int32_t k = 0; dead && k < cge_node_num_outputs(n); k++) {
                int32_t id = cge_node_output_id(n, k);
                dead = id >= 0 && !uses[id] && !cge_graph_value_is_output(g, id);
            }
            if (dead && !cc_is_nondeterministic(n)) {
                cge_status st = cge_graph_remove_node(g, n);
                if (st) {
                    free(uses);
                    return st;
                }
                any = true;
                f->changed++;
            }
        }
        free(uses);
        if (!any)
            break;
    }
    /* SplitToSequence nodes whose sequence folded into a Split. */
    for (int32_t i = 0; i < cge_graph_num_nodes(g); i++) {
        cge_node *n = cge_graph_node(g, i);
        if (cge_node_is_removed(n) || !cc_is_op(n, "SplitToSequence"))
            continue;
        int32_t id = cge_node_output_id(n, 0);
        bool used = cge_graph_value_is_output(g, id);
        for (int32_t j = 0; !used && j < cge_graph_num_nodes(g); j++) {
            const cge_node *m = cge_graph_node(g, j);
            for (int32_t k = 0; !cge_node_is_removed(m) && k < cge_node_num_inputs(m); k++)
                used |= cge_node_input_id(m, k) == id;
        }
        if (!used) {
            cge_status st = cge_graph_remove_node(g, n);
            if (st)
                return st;
            f->changed++;
        }
    }
    return CGE_OK;
}

cge_status cc_pass_fold_sequences(cc_ctx *ctx, cge_graph *g)
{
    if (!cge_graph_has_non_tensor_values(g))
        return CGE_OK;
    int32_t nn = cge_graph_num_nodes(g);
    fold f = {.ctx = ctx, .g = g, .num_ids = cge_graph_num_values(g)};
    f.k = calloc((size_t)f.num_ids + 1, sizeof *f.k);
    int32_t *order = malloc(sizeof *order * (size_t)(nn + 1));
    cge_status st = f.k && order ? cge_graph_topo_order(g, order) : oom();
    for (int32_t i = 0; f.k && i < f.num_ids; i++)
        f.k[i].n = -1;
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, order[i]);
        if (!cge_node_is_removed(n))
            st = visit(&f, n);
    }
    if (!st && f.changed)
        st = drop_dead(&f);
    for (int32_t i = 0; f.k && i < f.num_ids; i++)
        free(f.k[i].ids);
    free(f.k);
    free(order);
    if (!st && f.changed) {
        ctx->removed += f.changed;
        st = cge_graph_compact(g);
        /* the new nodes' descriptors, and the folded graph's values */
        if (!st)
            st = cc_pass_infer(ctx, g);
    }
    return st;
}
