/* optimize/fuse_attention: scaled dot-product attention as exporters write it
 * (MatMul(Q, K^T) -> scale -> mask -> Softmax -> MatMul(., V)) becomes one
 * cge.fused Attention node, with the Transposes around it folded into it. */
#include <math.h>
#include <string.h>

#include "base/cpu_isa.h"
#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

/* The pattern, from the Softmax over the last axis:
 *   S = MatMul(Q', B') [* or / c] [+ mask | Where(cond, ., fill) | Where(cond, fill, .)]
 *   Y = MatMul(Softmax(S), V') [-> Transpose keeping the last axis]
 * where Q' is Q through Transposes and Mul/Div by constant scalars, B' is K^T
 * the same way and V' is V through Transposes that keep its last axis. The
 * scalars multiply into "scale", the Transposes become the node's
 * permutations (read through strides: no copy). The scores, the Softmax and
 * everything between them must be read only inside the pattern. The kernel
 * sums in another order and scales after the product: results differ by
 * rounding. */

#define MAX_PEEL 4
/* Scores of at least this many known rows and keys stay unfused where the
 * kernel has no tiled path (try_fuse). */
#define FUSE_MAX_SQUARE 96

/* Whether the Attention kernel's tiled multi-row path runs on this CPU (the
 * test it makes itself: AVX-512F, src/ops/attention.c). */
static bool tiled_kernel(void)
{
#if defined(__x86_64__)
    return cge__cpu_has(CGE_CPU_AVX512F);
#else
    return false;
#endif
}

static bool available(void)
{
    const cge_op_def *d = cge_op_find(CGE_DOMAIN_FUSED, "Attention", 0);
    bool ok = d && cge_op_find_kernel(d, "cpu", CGE_F32);
    cge_clear_error();
    return ok;
}

static bool is_f32(const cge_graph *g, int32_t id, int32_t rank)
{
    cge_tensor_desc d;
    return !cge_graph_value_desc(g, id, &d) && d.dtype == CGE_F32 && d.shape.rank == rank;
}

/* A constant scalar (one element) of any float type. */
static bool scalar_of(const cge_graph *g, int32_t id, double *v)
{
    return cc_const_scalar(cge_graph_value_constant(g, id), v);
}

/* Whether value id is a MatMul's result, or one scaled by a constant scalar:
 * the scores side of the mask's Add. */
static bool leads_to_product(const cge_graph *g, int32_t id)
{
    cge_node *p = cge_graph_value_producer(g, id);
    double c;
    if (p && (cc_is_op(p, "Mul") || cc_is_op(p, "Div")) && cge_node_num_inputs(p) == 2) {
        int32_t a = cge_node_input_id(p, 0), b = cge_node_input_id(p, 1);
        if (scalar_of(g, b, &c))
            p = cge_graph_value_producer(g, a);
        else if (cc_is_op(p, "Mul") && scalar_of(g, a, &c))
            p = cge_graph_value_producer(g, b);
        else
            return false;
    }
    return p && cc_is_op(p, "MatMul");
}

/* Follows `*id` back through Transposes (composing *perm, logical axis i ->
 * axis perm[i] of the value) and, when scale is given, Mul/Div by constant
 * scalars. keep_last: stop at a Transpose that would move the last axis. */
static void peel(const cge_graph *g, int32_t *id, int32_t r, int32_t *perm, double *scale,
                 bool keep_last)
{
    for (int k = 0; k < MAX_PEEL; k++) {
        cge_node *p = cge_graph_value_producer(g, *id);
        if (!p || cge_node_num_outputs(p) != 1)
            return;
        double c;
        if (scale && cc_is_op(p, "Mul") && cge_node_num_inputs(p) == 2) {
            int32_t a = cge_node_input_id(p, 0), b = cge_node_input_id(p, 1);
            if (scalar_of(g, b, &c) && is_f32(g, a, r)) {
                *scale *= c;
                *id = a;
            } else if (scalar_of(g, a, &c) && is_f32(g, b, r)) {
                *scale *= c;
                *id = b;
            } else {
                return;
            }
        } else if (scale && cc_is_op(p, "Div") && cge_node_num_inputs(p) == 2 &&
                   scalar_of(g, cge_node_input_id(p, 1), &c) && c != 0.0 &&
                   is_f32(g, cge_node_input_id(p, 0), r)) {
            *scale /= c;
            *id = cge_node_input_id(p, 0);
        } else if (cc_is_op(p, "Transpose") && is_f32(g, cge_node_input_id(p, 0), r)) {
            const int64_t *tp = NULL;
            int64_t n = cge_attrs_get_ints(cge_node_attrs_const(p), "perm", &tp);
            int32_t np[CGE_MAX_RANK];
            for (int32_t i = 0; i < r; i++) {
                int32_t ax = perm[i];
                np[i] = n == r ? (int32_t)tp[ax] : r - 1 - ax; /* no perm: reversed */
                if (np[i] < 0 || np[i] >= r)
                    return;
            }
            if (keep_last && np[r - 1] != r - 1)
                return;
            memcpy(perm, np, sizeof(int32_t) * (size_t)r);
            *id = cge_node_input_id(p, 0);
        } else {
            return;
        }
    }
}

/* Whether a mask of this shape could make the scores' result larger than the
 * scores (broadcasting them): then it is not ours to fold. */
static bool mask_fits(const cge_graph *g, int32_t mask, const cge_shape *scores)
{
    cge_tensor_desc md;
    if (cge_graph_value_desc(g, mask, &md) || md.shape.rank > scores->rank)
        return false;
    for (int32_t j = 0; j < md.shape.rank; j++) {
        int64_t d = md.shape.dims[j], s = scores->dims[scores->rank - md.shape.rank + j];
        if (cge_dim_is_known(d) && d != 1 && cge_dim_is_known(s) && s != d)
            return false;
    }
    return true;
}

static bool perm_is_identity(const int32_t *p, int32_t r)
{
    for (int32_t i = 0; i < r; i++)
        if (p[i] != i)
            return false;
    return true;
}

static cge_status set_perm(cge_node *n, const char *name, const int32_t *p, int32_t r)
{
    if (perm_is_identity(p, r))
        return CGE_OK;
    int64_t v[CGE_MAX_RANK];
    for (int32_t i = 0; i < r; i++)
        v[i] = p[i];
    return cge_node_set_ints(n, name, v, r);
}

static cge_status try_fuse(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *sm)
{
    int32_t sin = cge_node_input_id(sm, 0), sout = cge_node_output_id(sm, 0);
    cge_tensor_desc sd;
    if (cge_graph_value_desc(g, sin, &sd) || sd.dtype != CGE_F32 || sd.shape.rank < 2)
        return CGE_OK;
    int32_t r = sd.shape.rank;
    /* Long queries against long keys, both known now (a ViT at 197 tokens),
     * on a CPU without AVX-512: there the kernel has only its row loop, and
     * the unfused packed GEMMs beat it (one thread, CPU time: 1.05-1.3x at
     * 128-256 tokens), so they stay unfused. With AVX-512 its tiled path is
     * 0.8-0.9x the unfused graph from 64 tokens up, and everything fuses.
     * Symbolic lengths always fuse (decoding, one query row, is the row
     * loop's case). */
    int64_t rows = sd.shape.dims[r - 2], keys = sd.shape.dims[r - 1];
    if (!tiled_kernel() && cge_dim_is_known(rows) && cge_dim_is_known(keys) &&
        rows >= FUSE_MAX_SQUARE && keys >= FUSE_MAX_SQUARE)
        return CGE_OK;
    int64_t axis = cge_attrs_get_int(cge_node_attrs_const(sm), "axis", -1);
    if (axis != -1 && axis != r - 1)
        return CGE_OK;
    cge_node *pv = cc_only_consumer(u, g, sout);
    if (!pv || !cc_is_op(pv, "MatMul") || cge_node_input_id(pv, 0) != sout ||
        !is_f32(g, cge_node_input_id(pv, 1), r) || !is_f32(g, cge_node_output_id(pv, 0), r))
        return CGE_OK;
    /* back from the Softmax: the mask, the scale, the product */
    cge_node *mask_op = NULL, *scale_op = NULL;
    int32_t x = sin, mask = -1, kind = 0;
    double fill = 0.0, scale = 1.0;
    cge_node *p = cge_graph_value_producer(g, x);
    if (p && cc_only_consumer(u, g, x) == sm && cge_node_num_inputs(p) == 2 && cc_is_op(p, "Add")) {
        for (int32_t side = 0; side < 2 && !mask_op; side++)
            if (leads_to_product(g, cge_node_input_id(p, side))) {
                mask_op = p;
                x = cge_node_input_id(p, side);
                mask = cge_node_input_id(p, 1 - side);
                kind = 1;
            }
    } else if (p && cc_only_consumer(u, g, x) == sm && cge_node_num_inputs(p) == 3 &&
               cc_is_op(p, "Where")) {
        for (int32_t side = 1; side <= 2 && !mask_op; side++)
            if (scalar_of(g, cge_node_input_id(p, 3 - side), &fill)) {
                mask_op = p;
                x = cge_node_input_id(p, side);
                mask = cge_node_input_id(p, 0);
                kind = side == 1 ? 2 : 3;
            }
    }
    if (mask_op) {
        cge_tensor_desc md, xd;
        if (cge_graph_value_desc(g, x, &xd) || xd.dtype != CGE_F32 || xd.shape.rank != r ||
            cge_graph_value_desc(g, mask, &md) || md.dtype != (kind == 1 ? CGE_F32 : CGE_BOOL) ||
            !mask_fits(g, mask, &xd.shape) || cc_only_consumer(u, g, x) != mask_op)
            return CGE_OK;
        p = cge_graph_value_producer(g, x);
    }
    double c;
    if (p && (cc_is_op(p, "Mul") || cc_is_op(p, "Div")) && cge_node_num_inputs(p) == 2) {
        int32_t a = cge_node_input_id(p, 0), b = cge_node_input_id(p, 1);
        int32_t y = x;
        if (scalar_of(g, b, &c) && (cc_is_op(p, "Mul") || c != 0.0)) {
            scale = cc_is_op(p, "Mul") ? c : 1.0 / c;
            x = a;
        } else if (cc_is_op(p, "Mul") && scalar_of(g, a, &c)) {
            scale = c;
            x = b;
        } else {
            return CGE_OK;
        }
        if (cc_only_consumer(u, g, y) != (mask_op ? mask_op : sm) || !is_f32(g, x, r))
            return CGE_OK;
        scale_op = p;
        p = cge_graph_value_producer(g, x);
    }
    cge_node *qk = p;
    if (!qk || !cc_is_op(qk, "MatMul") || cc_only_consumer(u, g, x) != (scale_op ? scale_op : mask_op ? mask_op : sm))
        return CGE_OK;
    int32_t qv = cge_node_input_id(qk, 0), kv = cge_node_input_id(qk, 1), vv = cge_node_input_id(pv, 1);
    if (!is_f32(g, qv, r) || !is_f32(g, kv, r))
        return CGE_OK;
    int32_t qp[CGE_MAX_RANK], kp[CGE_MAX_RANK], vp[CGE_MAX_RANK], op[CGE_MAX_RANK];
    for (int32_t i = 0; i < r; i++)
        qp[i] = kp[i] = vp[i] = op[i] = i;
    kp[r - 2] = r - 1; /* B is K^T: logical K [.., N, D] swaps B's last two axes */
    kp[r - 1] = r - 2;
    peel(g, &qv, r, qp, &scale, false);
    peel(g, &kv, r, kp, &scale, false);
    peel(g, &vv, r, vp, NULL, true);
    if (!isfinite(scale))
        return CGE_OK;
    /* an output Transpose that keeps the last axis is written through strides */
    cge_node *ot = NULL;
    int32_t yv = cge_node_output_id(pv, 0);
    cge_node *n = cc_only_consumer(u, g, yv);
    if (n && cc_is_op(n, "Transpose")) {
        const int64_t *tp = NULL;
        if (cge_attrs_get_ints(cge_node_attrs_const(n), "perm", &tp) == r && tp[r - 1] == r - 1) {
            ot = n;
            for (int32_t i = 0; i < r; i++)
                op[i] = (int32_t)tp[i];
            yv = cge_node_output_id(n, 0);
        }
    }
    char name[256];
    const char *ins[4] = {cge_graph_value_name(g, qv), cge_graph_value_name(g, kv),
                          cge_graph_value_name(g, vv), mask >= 0 ? cge_graph_value_name(g, mask) : ""};
    const char *y = cge_graph_value_name(g, yv);
    cge_node *all[6] = {qk, scale_op, mask_op, sm, pv, ot};
    cge_status st = CGE_OK;
    int32_t count = 0;
    for (int i = 0; i < 6 && !st; i++)
        if (all[i]) {
            st = cge_graph_remove_node(g, all[i]);
            count++;
        }
    cge_node *at = NULL;
    cc_fresh_name(ctx, g, "Attention", name, sizeof name);
    if (!st)
        st = cge_graph_add_node(g, "Attention", CGE_DOMAIN_FUSED, name, ins, mask >= 0 ? 4 : 3, &y, 1, &at);
    if (!st)
        st = cge_node_set_float(at, "scale", (float)scale);
    if (!st && kind)
        st = cge_node_set_int(at, "mask_kind", kind);
    if (!st && kind >= 2)
        st = cge_node_set_float(at, "fill", (float)fill);
    if (!st)
        st = set_perm(at, "q_perm", qp, r);
    if (!st)
        st = set_perm(at, "k_perm", kp, r);
    if (!st)
        st = set_perm(at, "v_perm", vp, r);
    if (!st)
        st = set_perm(at, "out_perm", op, r);
    if (!st)
        st = cc_fused_node(ctx, u, at, count);
    return st;
}

cge_status cc_pass_fuse_attention(cc_ctx *ctx, cge_graph *g)
{
    if (!available())
        return CGE_OK;
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (n && cc_is_op(n, "Softmax") && cge_node_num_inputs(n) == 1)
            st = try_fuse(ctx, &u, g, n);
    }
    cc_uses_free(&u);
    return st;
}
