/* prepare/kv_cache_static (and cge_graph_kv_cache_static): a concat-form
 * key/value cache export rewritten to the static form for a maximum length:
 * caches of max_len slots written in place at a position input, the lengths
 * the export reads from the caches' shapes replaced by that position, and
 * the attention masked to the written slots. Runs only when asked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* The construct (docs/guide.md, "From the concat form"):
 *   present = Concat(past, new, axis a)      past a graph input, present an output
 *   Shape(past)[a]     the past length  ->  pos (the value of cache_position)
 *   Shape(present)[a]  the total length ->  pos + seq, or max_len as an extent
 * After it: past is [.., max_len, ..], present = ScatterElements(past,
 * pos + arange(seq), new, axis a) (the static form's write, done in place
 * where past and present share a buffer), and every Softmax over the key
 * slots masks the slots at and after pos + seq. Lengths are followed through
 * Cast, Unsqueeze, Squeeze, Reshape, Identity, Add and Sub as "c * pos + r",
 * r computed from shapes only (so that no shape depends on pos's value);
 * where one reaches Range or Slice it becomes a shape-free form; anything
 * else is a [meta] error naming the node: a silent rewrite would give wrong
 * tokens, not an error. */

#define KV_MAX_CACHES 256
#define KV_POS_NAME "cache_position"

typedef struct kv_cache {
    int32_t past, present, fresh;   /* value ids: input, output, the new keys/values */
    int32_t axis, rank;
    int32_t seq;                    /* scalar int64: fresh's length along axis */
    int32_t valid;                  /* bool [max_len]: slot < pos + seq (key caches) */
    int32_t index;                  /* the scatter's index (shared by caches alike) */
    const char *past_name;
} kv_cache;

/* A length value: coef * pos + res, res a value computed without pos (or
 * zero); total: exactly a cache's total length (pos + its seq). */
typedef struct kv_lin {
    bool set, zero, total;
    int32_t coef;
    int32_t res;        /* value id of the residual, -1 with zero */
    int32_t cache;      /* the cache it was read from, for messages */
} kv_lin;

typedef struct kv_rw {
    cc_ctx *ctx;
    cge_graph *g;
    int64_t max_len;
    kv_cache caches[KV_MAX_CACHES];
    int32_t num_caches;
    kv_lin *lin;        /* per value id of the graph before the rewrite */
    int32_t num_lin;
    int32_t pos;        /* scalar int64 */
    int32_t softmax[KV_MAX_CACHES * 4];   /* node indices of the Softmaxes masked */
    int32_t num_softmax;
    /* Values that replace a removed node's result (new id, old id): the
     * new ones have no descriptor until the rewrite infers again. */
    int32_t alias_new[1024], alias_old[1024];
    int32_t num_alias;
    /* The presents' declared length symbols (graph outputs, before the
     * first inference replaced their descriptors): another input sized by
     * one (an attention_mask [batch, past + seq]) is max_len long now. */
    const int64_t *total_syms;
    int32_t num_total_syms;
} kv_rw;

static cge_status unknown(const kv_rw *r, int32_t cache, const cge_node *n, const char *what)
{
    const char *past = cache >= 0 && cache < r->num_caches ? r->caches[cache].past_name : "?";
    return cge_error(CGE_LAYER_META, CGE_ERR_UNSUPPORTED,
                     "kv_cache_max_len: the length of cache '%s' reaches %s '%s' (%s), a construct "
                     "the rewrite to the static form does not know; export the static form "
                     "instead (docs/guide.md, \"Static-cache decoding\")",
                     past, n ? cge_node_op_type(n) : "?", n ? cge_node_name(n) : "?", what);
}

static const char *vname(const kv_rw *r, int32_t id) { return cge_graph_value_name(r->g, id); }

/* A node of one output with a fresh name; returns the output's id (-1 on error). */
static int32_t mk(kv_rw *r, const char *op, const int32_t *ins, int32_t n, cge_node **out)
{
    const char *names[8];
    for (int32_t i = 0; i < n; i++)
        names[i] = ins[i] >= 0 ? vname(r, ins[i]) : "";
    char nb[96], ob[128];
    cc_fresh_name(r->ctx, r->g, "kv_static", nb, sizeof nb);
    snprintf(ob, sizeof ob, "%s_out", nb);
    const char *outs[1] = {ob};
    cge_node *node = NULL;
    if (cge_graph_add_node(r->g, op, NULL, nb, names, n, outs, 1, &node))
        return -1;
    r->ctx->added++;
    if (out)
        *out = node;
    return cge_graph_value_id(r->g, ob);
}

static int32_t konst(kv_rw *r, cge_dtype dt, int32_t rank, const int64_t *dims, const void *data)
{
    cge_shape s = {.rank = rank};
    for (int32_t i = 0; i < rank; i++)
        s.dims[i] = dims[i];
    char b[96];
    static const int64_t dummy = 0;   /* a zero-element constant still needs a pointer */
    if (cc_add_const(r->ctx, r->g, "kv_static_c", dt, &s, data ? data : &dummy, b, sizeof b))
        return -1;
    return cge_graph_value_id(r->g, b);
}

/* A scalar (rank 0) or [1] integer constant of dtype int64 or int32. */
static int32_t kint(kv_rw *r, cge_dtype dt, int32_t rank, int64_t v)
{
    int64_t one = 1;
    if (dt == CGE_I32) {
        int32_t x = (int32_t)v;
        return konst(r, dt, rank, &one, &x);
    }
    return konst(r, CGE_I64, rank, &one, &v);
}

/* A constant's tensor: a graph constant (the importer folds ONNX Constant nodes). */
static bool const_int(const cge_graph *g, int32_t id, int64_t *v, int64_t *numel)
{
    const cge_tensor *t = cge_graph_value_constant(g, id);
    if (!t || (t->dtype != CGE_I64 && t->dtype != CGE_I32))
        return false;
    *numel = cge_shape_numel(&t->shape);
    if (*numel != 1)
        return true;
    *v = t->dtype == CGE_I64 ? ((const int64_t *)t->data)[0] : ((const int32_t *)t->data)[0];
    return true;
}

static cge_tensor_desc desc(const kv_rw *r, int32_t id)
{
    cge_tensor_desc d = {0};
    cge_graph_value_desc(r->g, id, &d);
    for (int32_t i = 0; d.dtype == CGE_DTYPE_UNDEFINED && i < r->num_alias; i++)
        if (r->alias_new[i] == id)
            cge_graph_value_desc(r->g, r->alias_old[i], &d);
    return d;
}

static int64_t numel_or(const cge_tensor_desc *d)
{
    return cge_shape_is_static(&d->shape) ? cge_shape_numel(&d->shape) : -1;
}

/* Reshape v to `rank` 0 or 1 (one element). */
static int32_t reshape1(kv_rw *r, int32_t v, int32_t rank)
{
    int64_t dims = rank, one = 1;
    int32_t shape = rank ? konst(r, CGE_I64, 1, &dims, &one) : konst(r, CGE_I64, 1, &(int64_t){0}, NULL);
    if (shape < 0)
        return -1;
    int32_t ins[2] = {v, shape};
    return mk(r, "Reshape", ins, 2, NULL);
}

static int32_t cast_to(kv_rw *r, int32_t v, cge_dtype dt)
{
    if (desc(r, v).dtype == dt)
        return v;
    cge_node *n = NULL;
    int32_t out = mk(r, "Cast", &v, 1, &n);
    if (out >= 0 && cge_node_set_int(n, "to", (int64_t)dt))
        return -1;
    return out;
}

/* A lin value's residual as a value of dtype dt and rank 0 or 1. */
static int32_t residual(kv_rw *r, const kv_lin *l, cge_dtype dt, int32_t rank)
{
    if (l->zero)
        return kint(r, dt, rank, 0);
    int32_t v = cast_to(r, l->res, dt);
    return v < 0 ? v : reshape1(r, v, rank);
}

/* pos as dtype dt (rank 0). */
static int32_t pos_as(kv_rw *r, cge_dtype dt) { return cast_to(r, r->pos, dt); }

static kv_lin plain(int32_t id)
{
    return (kv_lin){.set = true, .coef = 0, .res = id, .cache = -1};
}

static kv_lin get_lin(const kv_rw *r, int32_t id)
{
    if (id >= 0 && id < r->num_lin && r->lin[id].set)
        return r->lin[id];
    return plain(id);
}

static bool is_lin(const kv_rw *r, int32_t id)
{
    return id >= 0 && id < r->num_lin && r->lin[id].set;
}

/* Every use of node n's output 0 reads `with` instead; n is removed. */
static cge_status replace_node(kv_rw *r, cge_node *n, int32_t with)
{
    if (with < 0)
        return cge_last_error_status() ? cge_last_error_status() : CGE_ERR_INTERNAL;
    int32_t out = cge_node_output_id(n, 0);
    if (cge_graph_value_is_output(r->g, out))
        return unknown(r, -1, n, "its result is a graph output");
    if (r->num_alias < (int32_t)(sizeof r->alias_new / sizeof r->alias_new[0])) {
        r->alias_new[r->num_alias] = with;
        r->alias_old[r->num_alias++] = out;
    }
    cge_status st = cge_graph_replace_uses(r->g, vname(r, out), vname(r, with));
    if (!st)
        st = cge_graph_remove_node(r->g, n);
    r->ctx->removed++;
    return st;
}

/* A copy of n (same op and attributes) with input `slot` reading `v`. */
static int32_t clone_with(kv_rw *r, const cge_node *n, const int32_t *ins)
{
    cge_node *c = NULL;
    int32_t out = mk(r, cge_node_op_type(n), ins, cge_node_num_inputs(n), &c);
    if (out >= 0 && cc_copy_attrs(c, n))
        return -1;
    return out;
}

/* Range(start, limit, delta) with a length in start or limit. */
static cge_status rewrite_range(kv_rw *r, cge_node *n)
{
    kv_lin s = get_lin(r, cge_node_input_id(n, 0)), l = get_lin(r, cge_node_input_id(n, 1));
    int32_t cache = s.cache >= 0 ? s.cache : l.cache;
    if (is_lin(r, cge_node_input_id(n, 2)) && get_lin(r, cge_node_input_id(n, 2)).coef)
        return unknown(r, cache, n, "a step that depends on the length");
    cge_dtype dt = desc(r, cge_node_output_id(n, 0)).dtype;
    int32_t delta = cge_node_input_id(n, 2);
    if (s.coef == 1 && l.coef == 1) {
        /* arange(past, past + seq) (positions): arange(r_s, r_l) + pos. */
        int32_t rs = residual(r, &s, dt, 0), rl = residual(r, &l, dt, 0);
        int32_t ins[3] = {rs, rl, delta};
        int32_t range = rs < 0 || rl < 0 ? -1 : mk(r, "Range", ins, 3, NULL);
        int32_t p = range < 0 ? -1 : pos_as(r, dt);
        int32_t add[2] = {range, p};
        return replace_node(r, n, p < 0 ? -1 : mk(r, "Add", add, 2, NULL));
    }
    if (s.coef == 0 && l.coef == 1 && l.total) {
        /* arange(0, total) over the key slots: all max_len of them. */
        int32_t rs = residual(r, &s, dt, 0), ml = kint(r, dt, 0, r->max_len);
        int32_t ins[3] = {rs, ml, delta};
        return replace_node(r, n, rs < 0 || ml < 0 ? -1 : mk(r, "Range", ins, 3, NULL));
    }
    return unknown(r, cache, n, "not arange(past, past + seq) nor arange(0, total)");
}

/* Slice(data, starts, ends[, axes[, steps]]) with a length in starts or ends. */
static cge_status rewrite_slice(kv_rw *r, cge_node *n)
{
    int32_t ni = cge_node_num_inputs(n);
    kv_lin s = get_lin(r, cge_node_input_id(n, 1)), e = get_lin(r, cge_node_input_id(n, 2));
    int32_t cache = s.cache >= 0 ? s.cache : e.cache;
    for (int32_t i = 3; i < ni; i++)
        if (is_lin(r, cge_node_input_id(n, i)))
            return unknown(r, cache, n, "axes or steps that depend on the length");
    int64_t axis = 0, step = 1, cnt = 1;
    if (ni > 3 && cge_node_input_id(n, 3) >= 0 &&
        (!const_int(r->g, cge_node_input_id(n, 3), &axis, &cnt) || cnt != 1))
        return unknown(r, cache, n, "axes not one constant");
    if (ni > 4 && cge_node_input_id(n, 4) >= 0 &&
        (!const_int(r->g, cge_node_input_id(n, 4), &step, &cnt) || cnt != 1 || step != 1))
        return unknown(r, cache, n, "steps not the constant 1");
    cge_tensor_desc dd = desc(r, cge_node_input_id(n, 0));
    cge_tensor_desc sd = desc(r, cge_node_input_id(n, 1));
    if (numel_or(&sd) != 1 || dd.shape.rank < 1)
        return unknown(r, cache, n, "not a one-axis slice");
    if (axis < 0)
        axis += dd.shape.rank;
    if (axis < 0 || axis >= dd.shape.rank)
        return unknown(r, cache, n, "axis out of range");
    int64_t have = dd.shape.dims[axis];
    if (have >= 0 && have < r->max_len) {   /* unknown sizes: the kernels check */
        char why[160];
        snprintf(why, sizeof why, "it slices %lld along axis %lld, fewer than kv_cache_max_len %lld",
                 (long long)have, (long long)axis, (long long)r->max_len);
        return unknown(r, cache, n, why);
    }
    cge_dtype it = sd.dtype;
    if (s.coef == 1 && e.coef == 1) {
        /* A window [past + a, past + b): rows pos + arange(a, b), gathered. */
        int32_t rs = residual(r, &s, it, 0), re = residual(r, &e, it, 0);
        int32_t one = kint(r, it, 0, 1);
        int32_t ins[3] = {rs, re, one};
        int32_t range = rs < 0 || re < 0 || one < 0 ? -1 : mk(r, "Range", ins, 3, NULL);
        int32_t p = range < 0 ? -1 : pos_as(r, it);
        int32_t add[2] = {range, p};
        int32_t idx = p < 0 ? -1 : mk(r, "Add", add, 2, NULL);
        cge_node *gn = NULL;
        int32_t gi[2] = {cge_node_input_id(n, 0), idx};
        int32_t out = idx < 0 ? -1 : mk(r, "Gather", gi, 2, &gn);
        if (out >= 0 && cge_node_set_int(gn, "axis", axis))
            out = -1;
        return replace_node(r, n, out);
    }
    if (s.coef == 0 && e.coef == 1 && e.total) {
        /* [a, total) over the key slots: [a, max_len); the mask before the
         * Softmax hides the slots not written yet. */
        int32_t rs = residual(r, &s, it, 1), me = kint(r, it, 1, r->max_len);
        int32_t ins[5];
        for (int32_t i = 0; i < ni; i++)
            ins[i] = cge_node_input_id(n, i);
        ins[1] = rs, ins[2] = me;
        return replace_node(r, n, rs < 0 || me < 0 ? -1 : clone_with(r, n, ins));
    }
    return unknown(r, cache, n, "not a window [past + a, past + b) nor [a, total)");
}

/* The length values in n's inputs, carried through n or rewritten at it. */
static cge_status visit(kv_rw *r, cge_node *n)
{
    int32_t ni = cge_node_num_inputs(n), lin_in = -1, cache = -1;
    bool any_pos = false;
    for (int32_t i = 0; i < ni; i++) {
        int32_t id = cge_node_input_id(n, i);
        if (is_lin(r, id)) {
            lin_in = i;
            any_pos |= r->lin[id].coef != 0;
            if (cache < 0)
                cache = r->lin[id].cache;
        }
    }
    if (lin_in < 0)
        return CGE_OK;
    int32_t out = cge_node_num_outputs(n) == 1 ? cge_node_output_id(n, 0) : -1;
    bool carried = out >= 0 && out < r->num_lin && !cge_graph_value_is_output(r->g, out);
    if (carried && (cc_is_op(n, "Cast") || cc_is_op(n, "Unsqueeze") || cc_is_op(n, "Squeeze") ||
                    cc_is_op(n, "Reshape") || cc_is_op(n, "Identity")) && lin_in == 0) {
        cge_tensor_desc od = desc(r, out);
        if (any_pos && numel_or(&od) != 1)
            return unknown(r, cache, n, "a length inside a tensor of more than one element");
        kv_lin l = r->lin[cge_node_input_id(n, 0)];
        if (!l.zero) {
            int32_t ins[8];
            for (int32_t i = 0; i < ni && i < 8; i++)
                ins[i] = cge_node_input_id(n, i);
            ins[0] = l.res;
            l.res = clone_with(r, n, ins);
            if (l.res < 0)
                return cge_last_error_status();
        }
        r->lin[out] = l;
        return CGE_OK;
    }
    if (carried && (cc_is_op(n, "Add") || cc_is_op(n, "Sub")) && ni == 2) {
        kv_lin a = get_lin(r, cge_node_input_id(n, 0)), b = get_lin(r, cge_node_input_id(n, 1));
        bool sub = cc_is_op(n, "Sub");
        kv_lin l = {.set = true, .coef = sub ? a.coef - b.coef : a.coef + b.coef,
                    .cache = cache, .res = -1};
        if (b.zero)
            l.zero = a.zero, l.res = a.res;
        else if (a.zero && !sub)
            l.res = b.res;
        else {
            int32_t ins[2] = {a.zero ? kint(r, desc(r, out).dtype, 0, 0) : a.res, b.res};
            l.res = ins[0] < 0 ? -1 : clone_with(r, n, ins);
            if (l.res < 0)
                return cge_last_error_status();
        }
        cge_tensor_desc od = desc(r, out);
        if (l.coef != 0 && numel_or(&od) != 1)
            return unknown(r, cache, n, "a length inside a tensor of more than one element");
        r->lin[out] = l;
        return CGE_OK;
    }
    if (cc_is_op(n, "Range"))
        return rewrite_range(r, n);
    if (cc_is_op(n, "Slice"))
        return rewrite_slice(r, n);
    if (any_pos)
        return unknown(r, cache, n, "a length used as data or as a shape");
    /* Only pos-free residuals (past + seq - past): read them as they are. */
    for (int32_t i = 0; i < ni; i++) {
        int32_t id = cge_node_input_id(n, i);
        if (!is_lin(r, id))
            continue;
        kv_lin l = r->lin[id];
        cge_tensor_desc d = desc(r, id);
        int32_t v = l.zero ? konst(r, d.dtype, d.shape.rank, d.shape.dims,
                                   &(int64_t){0}) : l.res;
        if (v < 0 || cge_node_set_input(n, i, vname(r, v)))
            return cge_last_error_status();
    }
    return CGE_OK;
}

/* The length seeds: Gathers of axis a of Shape(past) and Shape(present). */
static cge_status seed(kv_rw *r, const cc_uses *u, int32_t c, int32_t id, bool total)
{
    kv_cache *k = &r->caches[c];
    int32_t nu = cc_uses_count(u, id);
    cc_use *uses = calloc((size_t)(nu ? nu : 1), sizeof *uses);
    if (!uses)
        return cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "kv_cache_max_len: out of memory");
    nu = cc_uses_list(u, id, uses, nu);
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < nu; i++) {
        cge_node *sh = uses[i].node;
        if (!cc_is_op(sh, "Shape"))
            continue;   /* checked elsewhere */
        const cge_attrs *at = cge_node_attrs_const(sh);
        int64_t start = cge_attrs_get_int(at, "start", 0), end = cge_attrs_get_int(at, "end", k->rank);
        if (start < 0)
            start += k->rank;
        if (end < 0)
            end += k->rank;
        if (end > k->rank)
            end = k->rank;
        if (k->axis < start || k->axis >= end)
            continue;
        int32_t sid = cge_node_output_id(sh, 0), ns = cc_uses_count(u, sid);
        cc_use su[64];
        if (cge_graph_value_is_output(r->g, sid) || ns > 64) {
            st = unknown(r, c, sh, "a Shape read too widely");
            break;
        }
        ns = cc_uses_list(u, sid, su, ns);
        for (int32_t j = 0; !st && j < ns; j++) {
            cge_node *gn = su[j].node;
            int64_t ix = 0, cnt = 0;
            int32_t gout = cge_node_output_id(gn, 0);
            if (!cc_is_op(gn, "Gather") || su[j].slot != 0 ||
                !const_int(r->g, cge_node_input_id(gn, 1), &ix, &cnt) || cnt != 1) {
                st = unknown(r, c, gn, "the cache's Shape read other than by a Gather of one "
                                       "element");
                break;
            }
            if (ix < 0)
                ix += end - start;
            if (ix != k->axis - start)
                continue;   /* another axis: unchanged */
            if (gout >= r->num_lin) {
                st = cge_error(CGE_LAYER_META, CGE_ERR_INTERNAL, "kv_cache_max_len: value table");
                break;
            }
            r->lin[gout] = (kv_lin){.set = true, .coef = 1, .zero = !total,
                                    .res = total ? k->seq : -1, .total = total, .cache = c};
        }
    }
    free(uses);
    return st;
}

/* The caches: a graph input whose only readers are Shapes and one
 * Concat(past, new), that Concat a graph output. (A past of fixed length is
 * a cache too: the user asked for the rewrite, and what reads the present is
 * checked below.) */
static cge_status find_caches(kv_rw *r, const cc_uses *u)
{
    cge_graph *g = r->g;
    for (int32_t i = 0; i < cge_graph_num_inputs(g); i++) {
        int32_t id = cge_graph_value_id(g, cge_graph_input(g, i));
        int32_t nu = cc_uses_count(u, id);
        if (nu < 1)
            continue;
        cc_use *uses = malloc(sizeof *uses * (size_t)nu);
        if (!uses)
            return cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "kv_cache_max_len: out of memory");
        nu = cc_uses_list(u, id, uses, nu);
        cge_node *cat = NULL;
        for (int32_t k = 0; k < nu; k++)
            if (cc_is_op(uses[k].node, "Concat") && uses[k].slot == 0 &&
                cge_node_num_inputs(uses[k].node) == 2 &&
                cge_graph_value_is_output(g, cge_node_output_id(uses[k].node, 0)))
                cat = uses[k].node;
        cge_tensor_desc pd = desc(r, id);
        int64_t axis = cat ? cge_attrs_get_int(cge_node_attrs_const(cat), "axis", 0) : -1;
        if (axis < 0 && cat)
            axis += pd.shape.rank;
        cge_node *other = NULL;
        for (int32_t k = 0; cat && k < nu; k++)
            if (uses[k].node != cat && !cc_is_op(uses[k].node, "Shape"))
                other = uses[k].node;
        free(uses);
        if (!cat || axis < 0 || axis >= pd.shape.rank)
            continue;
        if (r->num_caches == KV_MAX_CACHES)
            return cge_error(CGE_LAYER_META, CGE_ERR_UNSUPPORTED,
                             "kv_cache_max_len: more than %d caches", KV_MAX_CACHES);
        if (other)
            return cge_error(CGE_LAYER_META, CGE_ERR_UNSUPPORTED,
                             "kv_cache_max_len: cache input '%s' is read by %s '%s' besides its "
                             "Concat '%s'; the rewrite knows only Shape readers",
                             cge_graph_input(g, i), cge_node_op_type(other),
                             cge_node_name(other), cge_node_name(cat));
        r->caches[r->num_caches++] = (kv_cache){
            .past = id, .present = cge_node_output_id(cat, 0), .fresh = cge_node_input_id(cat, 1),
            .axis = (int32_t)axis, .rank = pd.shape.rank, .past_name = cge_graph_input(g, i),
            .valid = -1, .index = -1};
    }
    if (!r->num_caches)
        return cge_error(CGE_LAYER_META, CGE_ERR_UNSUPPORTED,
                         "kv_cache_max_len: graph '%s' has no concat-form cache (a graph input "
                         "concatenated with new values into a graph output)",
                         cge_graph_name(g));
    return CGE_OK;
}

static cge_status make_index(kv_rw *r, kv_cache *k);

/* present = ScatterElements(past, pos + arange(seq) along the axis, new). */
static cge_status write_in_place(kv_rw *r, kv_cache *k)
{
    cge_graph *g = r->g;
    cge_node *cat = cge_graph_value_producer(g, k->present);
    cge_tensor_desc pd = desc(r, k->past);
    pd.shape.dims[k->axis] = r->max_len;
    cge_status st = cge_graph_set_desc(g, k->past_name, pd.dtype, &pd.shape);
    if (st)
        return st;
    /* Caches whose new values may have the same shape (keys and values,
     * every layer) share one index, and so one seq and one mask: fewer
     * kernels per step. Known sizes and symbols must agree; an anonymous
     * dim (-1: an export's view(b, s, h, d) after a Range of positions
     * leaves the new keys' length so) matches anything, since
     * ScatterElements checks at every run that its indices have the new
     * values' shape: a cache whose new length differs from the one the
     * shared index was built for fails the run, it is never written or
     * masked with another cache's length. */
    cge_tensor_desc fd = desc(r, k->fresh);
    for (kv_cache *o = r->caches; fd.shape.rank == k->rank && o < k; o++) {
        cge_tensor_desc od = desc(r, o->fresh);
        bool alike = o->axis == k->axis && o->index >= 0 && od.shape.rank == fd.shape.rank;
        for (int32_t i = 0; alike && i < fd.shape.rank; i++)
            alike = od.shape.dims[i] == fd.shape.dims[i] || od.shape.dims[i] == CGE_DIM_DYNAMIC ||
                    fd.shape.dims[i] == CGE_DIM_DYNAMIC;
        if (alike) {
            k->seq = o->seq, k->index = o->index;
            break;
        }
    }
    int32_t idx = k->index;
    if (idx < 0) {
        st = make_index(r, k);
        idx = k->index;
    }
    if (st || idx < 0)
        return st ? st : cge_last_error_status();
    const char *present = cge_graph_value_name(g, k->present);
    const char *ins[3] = {k->past_name, vname(r, idx), vname(r, k->fresh)};
    char nb[96];
    snprintf(nb, sizeof nb, "%.80s/kv_write", cge_node_name(cat));
    if ((st = cge_graph_remove_node(g, cat)))
        return st;
    cge_node *sc = NULL;
    st = cge_graph_add_node(g, "ScatterElements", NULL, nb, ins, 3, &present, 1, &sc);
    if (!st)
        st = cge_node_set_int(sc, "axis", k->axis);
    r->ctx->fused++;
    return st;
}

/* The cache's seq (scalar) and the scatter's index pos + arange(seq) along
 * the axis, expanded to the new values' shape. */
static cge_status make_index(kv_rw *r, kv_cache *k)
{
    int32_t shape = mk(r, "Shape", &k->fresh, 1, NULL);
    int32_t ax = kint(r, CGE_I64, 0, k->axis);
    int32_t gi[2] = {shape, ax};
    cge_node *gn = NULL;
    k->seq = shape < 0 || ax < 0 ? -1 : mk(r, "Gather", gi, 2, &gn);
    if (k->seq < 0 || cge_node_set_int(gn, "axis", 0))
        return cge_last_error_status();
    int32_t zero = kint(r, CGE_I64, 0, 0), one = kint(r, CGE_I64, 0, 1);
    int32_t ri[3] = {zero, k->seq, one};
    int32_t range = mk(r, "Range", ri, 3, NULL);
    int32_t ai[2] = {range, r->pos};
    int32_t at = range < 0 ? -1 : mk(r, "Add", ai, 2, NULL);
    int64_t dims[CGE_MAX_RANK], rank = k->rank;
    for (int32_t i = 0; i < k->rank; i++)
        dims[i] = i == k->axis ? -1 : 1;
    int32_t to = konst(r, CGE_I64, 1, &rank, dims);
    int32_t rs[2] = {at, to};
    int32_t col = at < 0 || to < 0 ? -1 : mk(r, "Reshape", rs, 2, NULL);
    int32_t ex[2] = {col, shape};
    k->index = col < 0 ? -1 : mk(r, "Expand", ex, 2, NULL);
    return k->index < 0 ? cge_last_error_status() : CGE_OK;
}

/* Nodes none of whose results is read any more (the old length arithmetic). */
static cge_status drop_dead(kv_rw *r)
{
    cge_graph *g = r->g;
    int32_t nn = cge_graph_num_nodes(g);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(nn ? nn : 1));
    cc_uses u = {0};
    cge_status st = order ? cge_graph_topo_order(g, order)
                          : cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "kv_cache_max_len: out of memory");
    if (!st)
        st = cc_uses_build(&u, g);
    for (int32_t k = nn - 1; !st && k >= 0; k--) {
        cge_node *n = cge_graph_node(g, order[k]);
        if (cge_node_is_removed(n) || cc_is_nondeterministic(n))
            continue;
        bool used = false;
        for (int32_t o = 0; o < cge_node_num_outputs(n) && !used; o++)
            used = cge_node_output_id(n, o) >= 0 && cc_value_used(&u, g, cge_node_output_id(n, o));
        if (!used)
            st = cge_graph_remove_node(g, n);
    }
    cc_uses_free(&u);
    free(order);
    return st;
}

/* bool [max_len]: slot < pos + seq. */
static int32_t valid_slots(kv_rw *r, kv_cache *k)
{
    if (k->valid >= 0)
        return k->valid;
    for (int32_t c = 0; c < r->num_caches; c++)
        if (r->caches[c].seq == k->seq && r->caches[c].valid >= 0)
            return k->valid = r->caches[c].valid;   /* one mask per seq (write_in_place) */
    int64_t *slots = malloc(sizeof(int64_t) * (size_t)r->max_len);
    if (!slots)
        return -1;
    for (int64_t i = 0; i < r->max_len; i++)
        slots[i] = i;
    int32_t sl = konst(r, CGE_I64, 1, &r->max_len, slots);
    free(slots);
    int32_t ti[2] = {r->pos, k->seq};
    int32_t total = sl < 0 ? -1 : mk(r, "Add", ti, 2, NULL);
    int32_t li[2] = {sl, total};
    k->valid = total < 0 ? -1 : mk(r, "Less", li, 2, NULL);
    return k->valid;
}

/* The Softmax over the scores MatMul `mm` makes: the unwritten slots masked. */
static cge_status mask_scores(kv_rw *r, const cc_uses *u, int32_t c, cge_node *mm)
{
    kv_cache *k = &r->caches[c];
    int32_t v = cge_node_output_id(mm, 0);
    for (int32_t hop = 0; hop < 16; hop++) {
        cge_node *n = cc_only_consumer(u, r->g, v);
        if (!n)
            return unknown(r, c, mm, "attention scores read by more than one node or a graph output");
        if (cc_is_op(n, "Softmax")) {
            cge_tensor_desc xd = desc(r, v);
            int64_t axis = cge_attrs_get_int(cge_node_attrs_const(n), "axis", -1);
            if (axis != -1 && axis != xd.shape.rank - 1)
                return unknown(r, c, n, "a Softmax over an axis other than the key slots");
            if (xd.dtype != CGE_F32)
                return unknown(r, c, n, "scores not float32");
            int32_t valid = valid_slots(r, k);
            if (valid < 0)
                return cge_last_error_status();
            cge_node *p = cge_graph_value_producer(r->g, v);
            double fill;
            if (p && cc_is_op(p, "Where") && cge_graph_value_constant(r->g, cge_node_input_id(p, 2)) &&
                cc_const_scalar(cge_graph_value_constant(r->g, cge_node_input_id(p, 2)), &fill) &&
                cge_node_input_id(p, 1) >= 0) {
                /* The export's own mask (Where(causal, scores, -1e9)): one
                 * Where, its condition and-ed with the written slots. */
                int32_t ai[2] = {cge_node_input_id(p, 0), valid};
                int32_t cond = mk(r, "And", ai, 2, NULL);
                if (cond < 0 || cge_node_set_input(p, 0, vname(r, cond)))
                    return cge_last_error_status();
            } else {
                float big = -1e9f;
                int32_t f = konst(r, CGE_F32, 0, NULL, &big);
                int32_t wi[3] = {valid, v, f};
                int32_t w = f < 0 ? -1 : mk(r, "Where", wi, 3, NULL);
                if (w < 0 || cge_node_set_input(n, 0, vname(r, w)))
                    return cge_last_error_status();
            }
            if (r->num_softmax < (int32_t)(sizeof r->softmax / sizeof r->softmax[0]))
                r->softmax[r->num_softmax++] = cge_node_index(n);
            return CGE_OK;
        }
        bool ew = cc_is_op(n, "Div") || cc_is_op(n, "Mul") || cc_is_op(n, "Add") ||
                  cc_is_op(n, "Sub") || cc_is_op(n, "Cast") || cc_is_op(n, "Identity") ||
                  (cc_is_op(n, "Where") && cge_node_input_id(n, 0) != v);
        if (!ew || cge_node_num_outputs(n) != 1)
            return unknown(r, c, n, "between the attention scores and their Softmax");
        v = cge_node_output_id(n, 0);
    }
    return unknown(r, c, mm, "no Softmax within 16 nodes of the attention scores");
}

static bool masked_softmax(const kv_rw *r, const cge_node *n)
{
    for (int32_t i = 0; i < r->num_softmax; i++)
        if (cge_node_index(n) == r->softmax[i])
            return true;
    return false;
}

/* What reads the present (a rewritten cache) inside the graph: through
 * Transposes to a MatMul, as keys (slots the last axis of B: masked
 * scores) or values (slots the contracted axis, the weights a masked
 * Softmax). `pass` 0 does keys, 1 checks values. */
static cge_status follow(kv_rw *r, const cc_uses *u, int32_t c, int32_t v, int32_t axis, int32_t rank,
                         int pass)
{
    int32_t nu = cc_uses_count(u, v);
    cc_use uses[64];
    if (nu > 64)
        return unknown(r, c, NULL, "a cache read by more than 64 nodes");
    nu = cc_uses_list(u, v, uses, nu);
    for (int32_t i = 0; i < nu; i++) {
        cge_node *n = uses[i].node;
        cge_status st = CGE_OK;
        if (cc_is_op(n, "Transpose")) {
            const int64_t *perm = NULL;
            int64_t np = cge_attrs_get_ints(cge_node_attrs_const(n), "perm", &perm);
            int32_t to = -1;
            for (int32_t j = 0; j < np; j++)
                if (perm[j] == axis)
                    to = j;
            if (np < 0)
                to = rank - 1 - axis;
            st = to < 0 ? unknown(r, c, n, "a Transpose without the slot axis")
                        : follow(r, u, c, cge_node_output_id(n, 0), to, rank, pass);
        } else if (cc_is_op(n, "Identity") || cc_is_op(n, "Cast")) {
            st = follow(r, u, c, cge_node_output_id(n, 0), axis, rank, pass);
        } else if (cc_is_op(n, "MatMul") && uses[i].slot == 1 && axis == rank - 1) {
            if (pass == 0)
                st = mask_scores(r, u, c, n);
        } else if (cc_is_op(n, "MatMul") && uses[i].slot == 1 && axis == rank - 2) {
            cge_node *w = cge_graph_value_producer(r->g, cge_node_input_id(n, 0));
            while (w && (cc_is_op(w, "Cast") || cc_is_op(w, "Identity")))
                w = cge_graph_value_producer(r->g, cge_node_input_id(w, 0));
            if (pass == 1 && !(w && cc_is_op(w, "Softmax") && masked_softmax(r, w)))
                st = unknown(r, c, n, "values weighted by something other than a masked Softmax");
        } else {
            st = unknown(r, c, n, "a reader of the cache other than Transpose and MatMul");
        }
        if (st)
            return st;
    }
    return CGE_OK;
}

static cge_status rewrite(cc_ctx *ctx, cge_graph *g, int64_t max_len, const int64_t *total_syms,
                          int32_t num_total_syms)
{
    if (max_len <= 0)
        return cge_error(CGE_LAYER_META, CGE_ERR_INVALID_ARG,
                         "kv_cache_max_len %lld: want a positive length", (long long)max_len);
    if (cge_graph_value_id(g, KV_POS_NAME) >= 0)
        return cge_error(CGE_LAYER_META, CGE_ERR_EXISTS,
                         "kv_cache_max_len: graph '%s' already has a value named '%s'",
                         cge_graph_name(g), KV_POS_NAME);
    kv_rw *r = calloc(1, sizeof *r);
    if (!r)
        return cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "kv_cache_max_len: out of memory");
    r->ctx = ctx, r->g = g, r->max_len = max_len;
    r->total_syms = total_syms, r->num_total_syms = num_total_syms;
    cc_uses u = {0};
    cge_status st = cc_uses_build(&u, g);
    if (!st)
        st = find_caches(r, &u);
    r->num_lin = cge_graph_num_values(g);
    int32_t nn = cge_graph_num_nodes(g);
    int32_t *order = NULL;
    if (!st) {
        r->lin = calloc((size_t)r->num_lin, sizeof *r->lin);
        order = malloc(sizeof(int32_t) * (size_t)(nn ? nn : 1));
        if (!r->lin || !order)
            st = cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "kv_cache_max_len: out of memory");
    }
    if (!st)
        st = cge_graph_topo_order(g, order);
    if (!st) {
        cge_shape one = {.rank = 1, .dims = {1}};
        st = cge_graph_add_input(g, KV_POS_NAME, CGE_I64, &one);
    }
    if (!st) {
        r->pos = reshape1(r, cge_graph_value_id(g, KV_POS_NAME), 0);
        if (r->pos < 0)
            st = cge_last_error_status();
    }
    for (int32_t c = 0; !st && c < r->num_caches; c++)
        st = write_in_place(r, &r->caches[c]);
    for (int32_t i = 0; !st && i < cge_graph_num_inputs(g); i++) {
        int32_t id = cge_graph_value_id(g, cge_graph_input(g, i));
        bool cache = false;
        for (int32_t c = 0; c < r->num_caches; c++)
            cache |= r->caches[c].past == id;
        cge_tensor_desc d = desc(r, id);
        bool changed = false;
        for (int32_t k = 0; !cache && k < d.shape.rank; k++)
            for (int32_t t = 0; t < r->num_total_syms; t++)
                if (d.shape.dims[k] < CGE_DIM_DYNAMIC && d.shape.dims[k] == r->total_syms[t])
                    d.shape.dims[k] = r->max_len, changed = true;
        if (changed)
            st = cge_graph_set_desc(g, d.name, d.dtype, &d.shape);
    }
    for (int32_t c = 0; !st && c < r->num_caches; c++) {
        st = seed(r, &u, c, r->caches[c].past, false);
        if (!st)
            st = seed(r, &u, c, r->caches[c].present, true);
    }
    /* The graph's own nodes in order (the ones added read no length). */
    for (int32_t k = 0; !st && k < nn; k++) {
        cge_node *n = cge_graph_node(g, order[k]);
        if (!cge_node_is_removed(n))
            st = visit(r, n);
    }
    cc_uses_free(&u);
    if (!st)
        st = drop_dead(r);
    if (!st)
        st = cc_uses_build(&u, g);
    for (int pass = 0; !st && pass < 2; pass++)
        for (int32_t c = 0; !st && c < r->num_caches; c++)
            st = follow(r, &u, c, r->caches[c].present, r->caches[c].axis, r->caches[c].rank, pass);
    cc_uses_free(&u);
    if (!st)
        st = drop_dead(r);
    if (!st)
        st = cge_graph_compact(g);   /* the verifier wants no removed nodes left */
    if (!st && (st = cc_pass_infer(ctx, g)))
        st = cge_error(CGE_LAYER_META, st, "kv_cache_max_len: the graph rewritten to the static form "
                       "does not infer (an input sized by the total length, such as an "
                       "attention_mask, is not rewritten): %s", cge_last_error());
    free(order);
    free(r->lin);
    free(r);
    return st;
}

cge_status cc_pass_kv_cache_static(cc_ctx *ctx, cge_graph *g)
{
    if (ctx->opts.kv_cache_max_len <= 0)
        return CGE_OK;
    return rewrite(ctx, g, ctx->opts.kv_cache_max_len, NULL, 0);
}

/* The declared length symbol of each graph output that a Concat makes from
 * a graph input (a present, before inference describes it). */
static int32_t total_symbols(const cge_graph *g, int64_t *syms, int32_t cap)
{
    int32_t n = 0;
    for (int32_t i = 0; i < cge_graph_num_outputs(g) && n < cap; i++) {
        cge_node *cat = cge_graph_producer(g, cge_graph_output(g, i));
        cge_tensor_desc d;
        if (!cat || !cc_is_op(cat, "Concat") || cge_node_num_inputs(cat) != 2 ||
            cge_graph_value_kind(g, cge_node_input_id(cat, 0)) != CGE_VALUE_INPUT ||
            cge_graph_get_desc(g, cge_graph_output(g, i), &d))
            continue;
        int64_t axis = cge_attrs_get_int(cge_node_attrs_const(cat), "axis", 0);
        if (axis < 0)
            axis += d.shape.rank;
        if (axis >= 0 && axis < d.shape.rank && d.shape.dims[axis] < CGE_DIM_DYNAMIC)
            syms[n++] = d.shape.dims[axis];
    }
    cge_clear_error();
    return n;
}

cge_status cge_graph_kv_cache_static(cge_graph *g, int64_t max_len)
{
    if (!g)
        return cge_error(CGE_LAYER_META, CGE_ERR_INVALID_ARG, "kv_cache_max_len: graph is NULL");
    cc_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "kv_cache_max_len: out of memory");
    int64_t syms[KV_MAX_CACHES];
    int32_t ns = total_symbols(g, syms, KV_MAX_CACHES);
    cge_status st = cc_pass_infer(ctx, g);
    if (!st)
        st = rewrite(ctx, g, max_len, syms, ns);
    cc_forget_known(ctx);
    cge_stream_destroy(ctx->stream);
    if (ctx->own_dev)
        cge_device_destroy(ctx->dev);
    free(ctx);
    return st;
}
