/* prepare/infer and optimize/infer: shapes and dtypes of every value from the
 * input signature, with the values of small shape computations carried along,
 * symbolic ones included. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* optimize/infer redoes only the nodes that rewrites changed (graph
 * revisions), and all of it only when a changed node needs the carried values
 * again. Exported models compute shapes in the graph (Shape -> Gather ->
 * Concat -> Reshape, ConstantOfShape(Size(x) - 1), ...): with static inputs
 * those values are known here, and meta gets them, so the shapes downstream
 * become static; with symbolic inputs ([batch,3,4,4]) they are carried element
 * by element as symbolic values, so Reshape still gets [batch,48]. Nothing is
 * rewritten: constant folding removes such nodes later, at levels that fold.
 * Dimensions nobody can know stay dynamic. */

#define MAX_IO 16
/* Values carried along are shape-sized, not tensors. */
#define PROPAGATE_MAX_BYTES 4096
/* Elements of a symbolic value (a shape, a slice of one, a few of them
 * concatenated). */
#define SYM_MAX_ELEMS 64

/* An int64 value known element by element: numbers where is_dim is 0, unknown
 * sizes (a symbol, or CGE_DIM_DYNAMIC) where it is 1. Kept apart from `known`
 * so that no kernel ever reads a dim encoding as data. */
typedef struct sym_value {
    cge_symbolic_value pub;   /* points at the arrays below */
    int64_t elems[SYM_MAX_ELEMS];
    uint8_t is_dim[SYM_MAX_ELEMS];
} sym_value;

typedef struct propagation {
    void **known;          /* value id -> host data computed here (owned) */
    sym_value **sym;       /* value id -> symbolic value (owned); never with known */
    int32_t num_values;
} propagation;

static const void *value_of(const cge_graph *g, const propagation *p, int32_t id)
{
    if (id < 0)
        return NULL;
    const cge_tensor *c = cge_graph_value_constant(g, id);
    if (c)
        return c->data;
    return id < p->num_values ? p->known[id] : NULL;
}

/* Shape and Size need only the input's (static) shape, not its data. */
static bool from_shape(const cge_node *n, const cge_tensor_desc *in, const cge_tensor_desc *out,
                       void **host)
{
    int64_t v[CGE_MAX_RANK + 1];
    if (in[0].dtype == CGE_DTYPE_UNDEFINED || !cc_shape_values(n, &in[0].shape, &out[0].shape, v))
        return false;
    size_t bytes = cc_is_op(n, "Size") ? sizeof *v : sizeof *v * (size_t)out[0].shape.dims[0];
    host[0] = malloc(bytes ? bytes : 1);
    if (!host[0])
        return false;
    memcpy(host[0], v, bytes);
    return true;
}

/* Evaluate `n` when every input it has is known and its outputs are small. */
static void propagate(cc_ctx *ctx, cge_graph *g, propagation *p, cge_node *n,
                      const cge_op_def *def, const cge_tensor_desc *in, const void *const *vals,
                      const cge_tensor_desc *out)
{
    int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
    if (no == 0 || cc_is_nondeterministic(n))
        return;
    /* Sequences and optionals are run-time objects, never folded values. */
    for (int32_t i = 0; i < ni; i++)
        if (in[i].type != CGE_TYPE_TENSOR)
            return;
    for (int32_t i = 0; i < no; i++)
        if (out[i].type != CGE_TYPE_TENSOR)
            return;
    size_t total = 0;
    cge_dtype dt = CGE_DTYPE_UNDEFINED;
    for (int32_t i = 0; i < no; i++) {
        if (!cge_dtype_valid(out[i].dtype) || !cge_shape_is_static(&out[i].shape))
            return;
        total += cge_tensor_nbytes(out[i].dtype, &out[i].shape);
    }
    if (total > PROPAGATE_MAX_BYTES)
        return;
    void *host[MAX_IO] = {0};
    bool done = from_shape(n, in, out, host);
    if (!done) {
        cge_tensor ins[MAX_IO];
        for (int32_t i = 0; i < ni; i++) {
            ins[i] = (cge_tensor){.dtype = CGE_DTYPE_UNDEFINED};
            if (in[i].dtype == CGE_DTYPE_UNDEFINED)
                continue;
            if (!vals[i] || !cge_shape_is_static(&in[i].shape) ||
                cge_tensor_nbytes(in[i].dtype, &in[i].shape) > PROPAGATE_MAX_BYTES)
                return;
            ins[i] = (cge_tensor){.dtype = in[i].dtype, .shape = in[i].shape,
                                  .data = (void *)vals[i]};
            if (dt == CGE_DTYPE_UNDEFINED)
                dt = in[i].dtype;
        }
        const cge_kernel_def *k = cge_op_find_kernel(def, "cpu", dt);
        if (!k || cc_evaluate_node(ctx, n, k, ins, out, host) != CGE_OK) {
            /* Not known now; the run computes it (and reports any problem). */
            cge_clear_error();
            return;
        }
    }
    for (int32_t i = 0; i < no; i++) {
        int32_t id = cge_node_output_id(n, i);
        if (id >= 0 && id < p->num_values && !p->known[id]) {
            p->known[id] = host[i];
            host[i] = NULL;
        }
        free(host[i]);
    }
    (void)g;
}

/* ---- symbolic values ----------------------------------------------------------- */

static void sym_init(sym_value *v, int64_t numel)
{
    v->pub = (cge_symbolic_value){.numel = numel, .elems = v->elems, .is_dim = v->is_dim};
}

static void sym_set(sym_value *v, int64_t k, int64_t x, bool is_dim)
{
    /* a known size is a number like any other */
    v->is_dim[k] = is_dim && !cge_dim_is_known(x);
    v->elems[k] = v->is_dim[k] && !cge_dim_valid(x) ? CGE_DIM_DYNAMIC : x;
}

/* The element-wise view of value `id`: its symbolic value, or its known data
 * when it is a small integer tensor (then every element a number). */
static const sym_value *sym_view(const cge_graph *g, const propagation *p, int32_t id,
                                 const cge_tensor_desc *d, sym_value *tmp)
{
    if (id < 0 || d->dtype == CGE_DTYPE_UNDEFINED)
        return NULL;
    if (id < p->num_values && p->sym[id])
        return p->sym[id];
    const void *v = value_of(g, p, id);
    int64_t n = cge_shape_numel(&d->shape);
    if (!v || (d->dtype != CGE_I64 && d->dtype != CGE_I32) || n < 0 || n > SYM_MAX_ELEMS)
        return NULL;
    sym_init(tmp, n);
    for (int64_t k = 0; k < n; k++)
        sym_set(tmp, k, d->dtype == CGE_I64 ? ((const int64_t *)v)[k] : ((const int32_t *)v)[k],
                false);
    return tmp;
}

/* A known int64 scalar (or one-element tensor) input. */
static bool known_i64(const cge_graph *g, const propagation *p, const cge_node *n, int32_t i,
                      const cge_tensor_desc *in, int32_t ni, int64_t *out)
{
    sym_value tmp;
    const sym_value *v = i < ni ? sym_view(g, p, cge_node_input_id(n, i), &in[i], &tmp) : NULL;
    if (!v || v->pub.numel != 1 || v->is_dim[0])
        return false;
    *out = v->elems[0];
    return true;
}

/* An optional input that is not there (its default applies). */
static bool absent(const cge_tensor_desc *in, int32_t ni, int32_t i)
{
    return i >= ni || in[i].dtype == CGE_DTYPE_UNDEFINED;
}

/* One element of Add/Sub/Mul/Div: a, b numbers or (ad, bd) unknown sizes;
 * *rd says whether the result r is one. */
static void sym_arith(const cge_node *n, int64_t a, bool ad, int64_t b, bool bd, int64_t *r,
                      bool *rd)
{
    *rd = false;
    if (!ad && !bd) {
        bool ovf = false;
        if (cc_is_op(n, "Add"))
            ovf = __builtin_add_overflow(a, b, r);
        else if (cc_is_op(n, "Sub"))
            ovf = __builtin_sub_overflow(a, b, r);
        else if (cc_is_op(n, "Mul"))
            ovf = __builtin_mul_overflow(a, b, r);
        else if (b == 0 || (a == INT64_MIN && b == -1))
            ovf = true;   /* the run reports it */
        else
            *r = a / b;   /* truncation, as the kernel does */
        if (ovf)
            *r = CGE_DIM_DYNAMIC, *rd = true;
        return;
    }
    /* Only exact identities keep a size; anything computed from one is
     * unknown (2*N is no symbol of this graph). */
    if (ad && !bd && ((b == 0 && (cc_is_op(n, "Add") || cc_is_op(n, "Sub"))) ||
                      (b == 1 && (cc_is_op(n, "Mul") || cc_is_op(n, "Div"))))) {
        *r = a, *rd = true;
        return;
    }
    if (bd && !ad && ((a == 0 && cc_is_op(n, "Add")) || (a == 1 && cc_is_op(n, "Mul")))) {
        *r = b, *rd = true;
        return;
    }
    *r = CGE_DIM_DYNAMIC, *rd = true;
}

/* Elements [lo, hi) stepping by `step` of a length-`len` axis, as ONNX's
 * Slice clamps them; returns the count or -1 if it exceeds `max`. */
static int64_t slice_range(int64_t len, int64_t start, int64_t end, int64_t step, int64_t *idx,
                           int64_t max)
{
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (step > 0) {
        start = start < 0 ? 0 : (start > len ? len : start);
        end = end < 0 ? 0 : (end > len ? len : end);
    } else {
        start = start < 0 ? 0 : (start > len - 1 ? len - 1 : start);
        end = end < -1 ? -1 : (end > len - 1 ? len - 1 : end);
    }
    int64_t c = 0;
    for (int64_t i = start; step > 0 ? i < end : i > end; i += step) {
        if (c == max)
            return -1;
        idx[c++] = i;
    }
    return c;
}

/* Evaluate `n` element by element when an input is a symbolic value (or its
 * shape has unknown dims) and the output is a small int64 tensor: Shape,
 * Size, Gather, Slice and Concat of 1-D values, the copies (Identity,
 * Squeeze, Unsqueeze, Reshape, Flatten, Cast to int64) and Add/Sub/Mul/Div,
 * which compute only known numbers. Fills r; false if `n` is none of these
 * or its inputs are not all in reach. */
static bool sym_eval(const cge_graph *g, const propagation *p, const cge_node *n,
                     const cge_tensor_desc *in, int32_t ni, int64_t numel, sym_value *r)
{
    sym_value t0, t1;
    const sym_value *a = ni > 0 ? sym_view(g, p, cge_node_input_id(n, 0), &in[0], &t0) : NULL;
    const cge_attrs *at = cge_node_attrs_const(n);
    sym_init(r, numel);
    if (cc_is_op(n, "Shape")) {
        int64_t rank = in[0].shape.rank;
        int64_t s = cge_attrs_get_int(at, "start", 0);
        s = s < 0 ? s + rank : s;
        s = s < 0 ? 0 : (s > rank ? rank : s);
        if (s + numel > rank)
            return false;
        for (int64_t k = 0; k < numel; k++)
            sym_set(r, k, in[0].shape.dims[s + k], true);
        return true;
    }
    if (cc_is_op(n, "Size")) {
        /* N times known 1s is N; any other product with an unknown is unknown */
        int64_t prod = 1, unknown = 0;
        int32_t nu = 0;
        for (int32_t i = 0; i < in[0].shape.rank; i++) {
            int64_t d = in[0].shape.dims[i];
            if (!cge_dim_is_known(d))
                unknown = d, nu++;
            else if (__builtin_mul_overflow(prod, d, &prod))
                return false;
        }
        if (numel != 1 || nu == 0)
            return false;
        sym_set(r, 0, nu == 1 && prod == 1 ? unknown : CGE_DIM_DYNAMIC, true);
        return true;
    }
    if (!a)
        return false;
    if (cc_is_op(n, "Identity") || cc_is_op(n, "Squeeze") || cc_is_op(n, "Unsqueeze") ||
        cc_is_op(n, "Reshape") || cc_is_op(n, "Flatten") ||
        (cc_is_op(n, "Cast") && cge_attrs_get_int(at, "to", 0) == CGE_I64)) {
        if (a->pub.numel != numel)
            return false;
        memcpy(r->elems, a->elems, sizeof(int64_t) * (size_t)numel);
        memcpy(r->is_dim, a->is_dim, (size_t)numel);
        return true;
    }
    if (cc_is_op(n, "Gather")) {
        int64_t axis = cge_attrs_get_int(at, "axis", 0);
        const sym_value *ix = ni > 1 ? sym_view(g, p, cge_node_input_id(n, 1), &in[1], &t1) : NULL;
        if (in[0].shape.rank != 1 || (axis != 0 && axis != -1) || !ix || ix->pub.numel != numel)
            return false;
        for (int64_t k = 0; k < numel; k++) {
            int64_t i = ix->elems[k];
            i = i < 0 ? i + a->pub.numel : i;
            if (ix->is_dim[k] || i < 0 || i >= a->pub.numel)
                return false;   /* the run reports a bad index */
            r->elems[k] = a->elems[i];
            r->is_dim[k] = a->is_dim[i];
        }
        return true;
    }
    if (cc_is_op(n, "Slice")) {
        int64_t start, end, axis = 0, step = 1, idx[SYM_MAX_ELEMS];
        if (in[0].shape.rank != 1 || !known_i64(g, p, n, 1, in, ni, &start) ||
            !known_i64(g, p, n, 2, in, ni, &end) ||
            (!absent(in, ni, 3) && !known_i64(g, p, n, 3, in, ni, &axis)) ||
            (!absent(in, ni, 4) && !known_i64(g, p, n, 4, in, ni, &step)) ||
            (axis != 0 && axis != -1) || step == 0)
            return false;
        if (slice_range(a->pub.numel, start, end, step, idx, SYM_MAX_ELEMS) != numel)
            return false;
        for (int64_t k = 0; k < numel; k++) {
            r->elems[k] = a->elems[idx[k]];
            r->is_dim[k] = a->is_dim[idx[k]];
        }
        return true;
    }
    if (cc_is_op(n, "Concat")) {
        int64_t axis = cge_attrs_get_int(at, "axis", 0), c = 0;
        if (axis != 0 && axis != -1)
            return false;
        for (int32_t i = 0; i < ni; i++) {
            const sym_value *v = sym_view(g, p, cge_node_input_id(n, i), &in[i], &t1);
            if (!v || in[i].shape.rank != 1 || c + v->pub.numel > numel)
                return false;
            memcpy(r->elems + c, v->elems, sizeof(int64_t) * (size_t)v->pub.numel);
            memcpy(r->is_dim + c, v->is_dim, (size_t)v->pub.numel);
            c += v->pub.numel;
        }
        return c == numel;
    }
    if (cc_is_op(n, "Add") || cc_is_op(n, "Sub") || cc_is_op(n, "Mul") || cc_is_op(n, "Div")) {
        const sym_value *b = ni > 1 ? sym_view(g, p, cge_node_input_id(n, 1), &in[1], &t1) : NULL;
        if (!b)
            return false;
        int64_t na = a->pub.numel, nb = b->pub.numel;
        /* equal counts element by element, or one side a single element */
        if (!(na == numel && (nb == numel || nb == 1)) && !(nb == numel && na == 1))
            return false;
        for (int64_t k = 0; k < numel; k++) {
            int64_t ia = na == 1 ? 0 : k, ib = nb == 1 ? 0 : k, x;
            bool d;
            sym_arith(n, a->elems[ia], a->is_dim[ia], b->elems[ib], b->is_dim[ib], &x, &d);
            sym_set(r, k, x, d);
        }
        return true;
    }
    return false;
}

/* The symbolic counterpart of propagate: when the output is not known as
 * data, try element by element. An all-number result becomes known data
 * (every meta reads it then); any other is kept as a symbolic value. */
static void propagate_symbolic(const cge_graph *g, propagation *p, const cge_node *n,
                               const cge_tensor_desc *in, int32_t ni, const cge_tensor_desc *out)
{
    if (cge_node_num_outputs(n) != 1 || out[0].dtype != CGE_I64 ||
        !cge_shape_is_static(&out[0].shape))
        return;
    int32_t id = cge_node_output_id(n, 0);
    int64_t numel = cge_shape_numel(&out[0].shape);
    if (id < 0 || id >= p->num_values || p->known[id] || p->sym[id] || numel > SYM_MAX_ELEMS)
        return;
    sym_value r;
    if (!sym_eval(g, p, n, in, ni, numel, &r))
        return;
    bool any_dim = false;
    for (int64_t k = 0; k < numel; k++)
        any_dim |= r.is_dim[k] != 0;
    if (!any_dim) {
        int64_t *v = malloc(sizeof *v * (size_t)(numel ? numel : 1));
        if (v) {
            memcpy(v, r.elems, sizeof *v * (size_t)numel);
            p->known[id] = v;
        }
    } else {
        /* all-unknown entries too: a Concat with known ones may follow */
        sym_value *v = malloc(sizeof *v);
        if (v) {
            *v = r;
            sym_init(v, numel);
            p->sym[id] = v;
        }
    }
}

static int64_t inference_count;

int64_t cge_compiler_inference_count(void)
{
    return __atomic_load_n(&inference_count, __ATOMIC_RELAXED);
}

/* Meta of node `n` from its inputs' descriptors and the values at hand
 * (constants, and with `p` what was computed or carried so far), written to
 * its outputs' descriptors. */
static cge_status infer_node(cc_ctx *ctx, cge_graph *g, cge_node *n, propagation *p,
                             bool carry)
{
    int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
    const cge_op_def *def = cc_find_op(ctx, n);
    if (!def) {
        cge_status st = cge_node_check_schema(g, n);
        return st ? st : cge_last_error_status();
    }
    cge_tensor_desc small_in[MAX_IO], small_out[MAX_IO];
    const void *small_vals[MAX_IO];
    const cge_symbolic_value *syms[MAX_IO];
    bool any_sym = false;
    bool big = ni > MAX_IO || no > MAX_IO;
    cge_tensor_desc *in = big ? calloc((size_t)ni + 1, sizeof *in) : small_in;
    cge_tensor_desc *out = big ? calloc((size_t)no + 1, sizeof *out) : small_out;
    const void **vals = big ? calloc((size_t)ni + 1, sizeof *vals) : small_vals;
    cge_status st = CGE_OK;
    if (!in || !out || !vals) {
        st = cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "infer: out of memory");
    } else {
        for (int32_t i = 0; i < ni; i++) {
            in[i] = cc_in_desc(g, n, i);
            int32_t id = cge_node_input_id(n, i);
            vals[i] = value_of(g, p, id);
            if (!big) {
                syms[i] = !vals[i] && id >= 0 && id < p->num_values && p->sym[id]
                              ? &p->sym[id]->pub : NULL;
                any_sym |= syms[i] != NULL;
            }
        }
        for (int32_t i = 0; i < no; i++)
            out[i] = (cge_tensor_desc){.name = cge_node_output(n, i)};
        st = cge_op_infer(def, cge_node_name(n), cge_node_attrs_const(n), in, vals,
                          any_sym ? syms : NULL, ni, out, no);
        for (int32_t i = 0; !st && i < no; i++) {
            st = cge_graph_set_value_type(g, out[i].name, out[i].type);
            if (!st)
                st = cge_graph_set_desc(g, out[i].name, out[i].dtype, &out[i].shape);
        }
        if (!st && !big && carry) {
            propagate(ctx, g, p, n, def, in, vals, out);
            propagate_symbolic(g, p, n, in, ni, out);
        }
    }
    if (big) {
        free(in);
        free(out);
        free(vals);
    }
    return st;
}

void cc_forget_known(cc_ctx *ctx)
{
    for (int32_t i = 0; ctx->known && i < ctx->num_known; i++)
        free(ctx->known[i]);
    free(ctx->known);
    ctx->known = NULL;
    ctx->num_known = 0;
}

cge_status cc_pass_infer(cc_ctx *ctx, cge_graph *g)
{
    __atomic_fetch_add(&inference_count, 1, __ATOMIC_RELAXED);
    int32_t nn = cge_graph_num_nodes(g);
    propagation p = {.num_values = cge_graph_num_values(g)};
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(nn ? nn : 1));
    p.known = calloc((size_t)(p.num_values ? p.num_values : 1), sizeof(void *));
    p.sym = calloc((size_t)(p.num_values ? p.num_values : 1), sizeof(sym_value *));
    cge_status st = order && p.known && p.sym ? cge_graph_topo_order(g, order)
                                     : cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "infer: out of memory");
    for (int32_t k = 0; !st && k < nn; k++) {
        cge_node *n = cge_graph_node(g, order[k]);
        if (!cge_node_is_removed(n))
            st = infer_node(ctx, g, n, &p, true);
        /* Where sequences or optionals flow, what a node makes may depend
         * on their run-time contents (a SequenceAt of an element of unknown
         * rank): such a graph runs node by node, inferring with every value
         * at hand, so a node that cannot be described now stays undescribed. */
        if (st && cge_graph_has_non_tensor_values(g)) {
            cge_clear_error();
            st = CGE_OK;
        }
    }
    for (int32_t i = 0; p.sym && i < p.num_values; i++)
        free(p.sym[i]);
    free(p.sym);
    free(order);
    cc_forget_known(ctx);
    if (!st) {
        ctx->inferred_rev = cge_graph_revision(g);
        ctx->known = p.known;
        ctx->num_known = p.num_values;
        ctx->known_rev = ctx->inferred_rev;
    } else {
        for (int32_t i = 0; p.known && i < p.num_values; i++)
            free(p.known[i]);
        free(p.known);
    }
    return st;
}

/* A node whose descriptors may be stale: changed, or reading a value whose
 * descriptor changed, since the last inference, or with an output never
 * described (added by a rewrite). */
static bool changed_since(const cge_graph *g, const cge_node *n, uint64_t rev)
{
    if (cge_node_revision(n) > rev)
        return true;
    for (int32_t i = 0; i < cge_node_num_inputs(n); i++) {
        int32_t id = cge_node_input_id(n, i);
        if (id >= 0 && cge_graph_value_revision(g, id) > rev)
            return true;
    }
    for (int32_t i = 0; i < cge_node_num_outputs(n); i++)
        if (cc_out_desc(g, n, i).dtype == CGE_DTYPE_UNDEFINED)
            return true;
    return false;
}

cge_status cc_pass_infer_changes(cc_ctx *ctx, cge_graph *g)
{
    int32_t nn = cge_graph_num_nodes(g);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(nn ? nn : 1));
    cge_status st = order ? cge_graph_topo_order(g, order)
                          : cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "infer: out of memory");
    propagation none = {0};
    uint64_t rev = ctx->inferred_rev;
    bool lost = false;   /* a rewritten node lost a shape that values had fixed */
    for (int32_t k = 0; !st && !lost && k < nn; k++) {
        cge_node *n = cge_graph_node(g, order[k]);
        if (cge_node_is_removed(n) || !changed_since(g, n, rev))
            continue;
        /* What the outputs were: a rewrite keeps its outputs' names, so a
         * symbolic graph's fused node (dims symbolic either way) loses
         * nothing unless a dim known or symbolic before is not now. */
        cge_tensor_desc before[MAX_IO];
        int32_t no = cge_node_num_outputs(n);
        for (int32_t i = 0; i < no && i < MAX_IO; i++)
            before[i] = cc_out_desc(g, n, i);
        st = infer_node(ctx, g, n, &none, false);
        for (int32_t i = 0; !st && i < no; i++) {
            cge_tensor_desc d = cc_out_desc(g, n, i);
            if (cge_shape_is_static(&d.shape))
                continue;
            bool had = i < MAX_IO && cge_dtype_valid(before[i].dtype) &&
                       before[i].shape.rank == d.shape.rank;
            for (int32_t k = 0; had && k < d.shape.rank; k++)
                had = d.shape.dims[k] == before[i].shape.dims[k] ||
                      before[i].shape.dims[k] == CGE_DIM_DYNAMIC;
            lost |= !had;
        }
    }
    free(order);
    if (st)
        return st;
    if (lost)   /* values carried from the inputs are needed again */
        return cc_pass_infer(ctx, g);
    ctx->inferred_rev = cge_graph_revision(g);
    return CGE_OK;
}

cge_status cge_graph_infer_values(cge_graph *g)
{
    if (!g)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "infer: graph is NULL");
    cc_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "infer: out of memory");
    cge_status st = cc_pass_infer(ctx, g);
    cc_forget_known(ctx);
    /* Only the compile-time device may exist here (made when a value was
     * evaluated). */
    cge_stream_destroy(ctx->stream);
    if (ctx->own_dev)
        cge_device_destroy(ctx->dev);
    free(ctx);
    return st;
}
