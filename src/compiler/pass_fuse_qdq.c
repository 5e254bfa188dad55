/* optimize/fuse_qdq: DequantizeLinear -> float op -> QuantizeLinear patterns
 * of quantized (QDQ) models become integer operators that keep the data int8
 * between them (cge.fused QConv, QMatMul, QAdd, QMul, QLookup, QPool). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"
#include "ops/q8.h"

/* Runs first in optimize, before fold_constants would turn the weights'
 * DequantizeLinear into float constants; it folds everything else first
 * (the Identity, Cast and ConstantOfShape nodes torch writes for scales and
 * zero points). Activations use per-tensor scales
 * and zero points, weights per-tensor or per-channel ones, u8 or s8. Matched:
 *
 *   Conv(DQ x, DQ w [, DQ b | b]) [Relu|Clip] Q      -> QConv (w constant)
 *   Gemm / MatMul(DQ a, DQ w [, DQ b]) [Relu|Clip] Q -> QMatMul (w constant)
 *   Add / Mul(DQ a, DQ b) [Relu|Clip] Q              -> QAdd / QMul
 *   MaxPool / AveragePool / GlobalAveragePool(DQ x) Q -> QPool
 *   unary f(DQ x) Q (Relu, Clip, Sigmoid, HardSwish...) -> QLookup (a table
 *                                      made now with f's own kernel)
 *   view op / Concat (DQ x...) Q, all with one scale and zero point -> the
 *                                      same op on the int8 data
 *   QLinearConv / QLinearMatMul (ONNX's own, W constant)       -> QConv / QMatMul
 *
 * A Relu or Clip before the Q is a clamp of the requantised value (Q is
 * monotone and Q(0) is the zero point), and a QLookup that only clamps folds
 * into the QConv / QAdd before it. Where the arithmetic is fixed (QAdd, QMul,
 * QLookup, max pooling, views) the results equal the unfused path's bits;
 * integer convolution and matmul accumulate exactly where the float path
 * rounded, and averages likewise, so they agree within one quantisation step.
 * Anything else keeps running as it was. */

typedef struct qparam {
    int32_t s_id, z_id;          /* scale, zero point (-1: absent) */
    const float *s;              /* data (constant or inferred), else NULL */
    const void *z;
    cge_dtype qt;                /* the quantized dtype */
    int64_t n;                   /* number of scales */
    int64_t axis;
} qparam;

typedef struct qctx {
    cc_ctx *cc;
    cge_graph *g;
    cc_uses u;
    bool use_known;
} qctx;

static const void *value_data(const qctx *q, int32_t id)
{
    if (id < 0)
        return NULL;
    const cge_tensor *c = cge_graph_value_constant(q->g, id);
    if (c)
        return c->data;
    if (q->use_known && id < q->cc->num_known)
        return q->cc->known[id];
    return NULL;
}

static bool is_q8(cge_dtype t)
{
    return t == CGE_I8 || t == CGE_U8;
}

static int32_t zp_value(const qparam *p, int64_t i)
{
    return p->z ? cge__q_load(p->z, p->qt, i) : 0;
}

/* The parameters of Q or DQ node n (inputs 1 and 2); false unless the scale
 * is float32 and known, and the zero point known or absent. */
static bool read_params(const qctx *q, const cge_node *n, cge_dtype qt, qparam *p)
{
    memset(p, 0, sizeof *p);
    p->s_id = cge_node_input_id(n, 1);
    p->z_id = cge_node_num_inputs(n) > 2 ? cge_node_input_id(n, 2) : -1;
    cge_tensor_desc sd = cc_in_desc(q->g, n, 1);
    if (sd.dtype != CGE_F32 || !cge_shape_is_static(&sd.shape) || sd.shape.rank > 1)
        return false;
    p->n = cge_shape_numel(&sd.shape);
    p->s = value_data(q, p->s_id);
    p->qt = qt;
    p->axis = cge_attrs_get_int(cge_node_attrs_const(n), "axis", 1);
    if (p->z_id >= 0) {
        p->z = value_data(q, p->z_id);
        if (!p->z || cc_in_desc(q->g, n, 2).dtype != qt)
            return false;
    }
    return p->s != NULL && p->n >= 1;
}

static bool params_equal(const qparam *a, const qparam *b)
{
    if (a->n != 1 || b->n != 1 || a->qt != b->qt || a->s[0] != b->s[0])
        return false;
    return zp_value(a, 0) == zp_value(b, 0);
}

/* The producer of `id` seen through Casts that change nothing (torch writes
 * Q -> Cast(uint8) -> DQ). */
static int32_t through_casts(const qctx *q, int32_t id)
{
    for (;;) {
        cge_node *p = cge_graph_value_producer(q->g, id);
        if (!p || !cc_is_op(p, "Cast"))
            return id;
        int32_t in = cge_node_input_id(p, 0);
        cge_tensor_desc a, b;
        if (in < 0 || cge_graph_value_desc(q->g, in, &a) || cge_graph_value_desc(q->g, id, &b) ||
            a.dtype != b.dtype)
            return id;
        id = in;
    }
}

/* Input `slot` of n as DQ(x): x's id (int8 data) and the DQ's parameters;
 * per_tensor requires one scale. */
static bool dq_input(const qctx *q, const cge_node *n, int32_t slot, bool per_tensor, int32_t *x,
                     qparam *p)
{
    int32_t id = cge_node_num_inputs(n) > slot ? cge_node_input_id(n, slot) : -1;
    cge_node *dq = id >= 0 ? cge_graph_value_producer(q->g, id) : NULL;
    if (!dq || !cc_is_op(dq, "DequantizeLinear") || cge_node_num_inputs(dq) < 2)
        return false;
    *x = through_casts(q, cge_node_input_id(dq, 0));
    cge_tensor_desc xd;
    if (*x < 0 || cge_graph_value_desc(q->g, *x, &xd) ||
        !(is_q8(xd.dtype) || xd.dtype == CGE_I32) || !cge_shape_is_static(&xd.shape))
        return false;
    if (!read_params(q, dq, xd.dtype, p))
        return false;
    return !per_tensor || p->n == 1;
}

/* The Q that alone reads `id` (through a Relu or Clip that alone reads it):
 * *clamp_lo/hi get the activation's bounds in float (-inf/inf if none). */
static cge_node *q_output(const qctx *q, int32_t id, cge_node **act, float *lo, float *hi)
{
    *act = NULL;
    *lo = -INFINITY;
    *hi = INFINITY;
    cge_node *next = cc_only_consumer(&q->u, q->g, id);
    if (next && cge_node_num_outputs(next) == 1) {
        cc_activation av;
        if ((cc_is_op(next, "Relu") || cc_is_op(next, "Clip")) &&
            cc_match_activation(q->g, next, false, &av)) {
            if (!strcmp(av.name, "relu"))
                *lo = 0.0f;
            else if (!strcmp(av.name, "clip"))
                *lo = av.lo, *hi = av.hi;
            else
                return NULL;
            *act = next;
            next = cc_only_consumer(&q->u, q->g, cge_node_output_id(next, 0));
        }
    }
    if (!next || !cc_is_op(next, "QuantizeLinear") || cge_node_num_inputs(next) < 2)
        return NULL;
    return next;
}

static bool q_params(const qctx *q, const cge_node *qn, qparam *p)
{
    cge_tensor_desc yd = cc_out_desc(q->g, qn, 0);
    return is_q8(yd.dtype) && read_params(q, qn, yd.dtype, p) && p->n == 1;
}

/* [lo, hi] of the output in quantized units from a float clamp. */
static void clamp_units(const qparam *y, float lo, float hi, int64_t *qlo, int64_t *qhi)
{
    double z = zp_value(y, 0);
    *qlo = isinf(lo) ? -1024 : (int64_t)(rintf(lo / y->s[0]) + z);
    *qhi = isinf(hi) ? 1024 : (int64_t)(rintf(hi / y->s[0]) + z);
}

/* A zero point value for p (a fresh zero constant when the node had none). */
static cge_status zp_name(qctx *q, const qparam *p, char *buf, size_t size, const char **out)
{
    if (p->z_id >= 0) {
        *out = cge_graph_value_name(q->g, p->z_id);
        return CGE_OK;
    }
    int64_t zeros[1024] = {0};
    if (p->n * 4 > (int64_t)(sizeof zeros))
        return CGE_ERR_UNSUPPORTED;
    cge_shape sh = p->n == 1 ? CGE_SCALAR : CGE_SHAPE(p->n);
    cge_status st = cc_add_const(q->cc, q->g, "zero_point", p->qt, &sh, zeros, buf, size);
    *out = buf;
    return st;
}

/* Remove `nodes` (NULLs skipped) and add op (in `domain`) writing the
 * Q node's output name, with the Q output's descriptor. */
static cge_status replace(qctx *q, cge_node **nodes, int32_t count, cge_node *qn, const char *op,
                          const char *domain, const char *const *ins, int32_t ni, const cge_node *attrs_from,
                          cge_node **out)
{
    char out_name[256], name[256];
    snprintf(out_name, sizeof out_name, "%s", cge_node_output(qn, 0));
    cge_tensor_desc yd = cc_out_desc(q->g, qn, 0);
    cc_fresh_name(q->cc, q->g, op, name, sizeof name);
    /* names of inputs may live in removed nodes' storage: copy them first */
    char (*copy)[256] = malloc(sizeof *copy * (size_t)(ni ? ni : 1));
    const char **cins = malloc(sizeof *cins * (size_t)(ni ? ni : 1));
    if (!copy || !cins) {
        free(copy), free(cins);
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "fuse_qdq: out of memory");
    }
    for (int32_t i = 0; i < ni; i++) {
        snprintf(copy[i], sizeof copy[i], "%s", ins[i] ? ins[i] : "");
        cins[i] = copy[i];
    }
    cge_status st = CGE_OK;
    cge_node *f = NULL;
    const char *outs[1] = {out_name};
    /* the attribute source goes last, after its attributes are copied */
    for (int32_t k = 0; k < count && !st; k++)
        if (nodes[k] && nodes[k] != attrs_from)
            st = cge_graph_remove_node(q->g, nodes[k]);
    if (!st)
        st = cge_graph_add_node(q->g, op, domain, name, cins, ni, outs, 1, &f);
    if (!st && attrs_from)
        st = cc_copy_attrs(f, attrs_from);
    if (!st && attrs_from)
        st = cge_graph_remove_node(q->g, (cge_node *)attrs_from);
    if (!st)
        st = cge_graph_set_desc(q->g, out_name, yd.dtype, &yd.shape);
    if (!st) {
        q->cc->fused += count;
        q->cc->removed += count;
        q->cc->added++;
        st = cc_uses_add_node(&q->u, f);
    }
    free(copy), free(cins);
    if (!st && out)
        *out = f;
    return st;
}

/* The clamp (and w_const) attributes of a new QConv / QMatMul / QAdd / QMul. */
static cge_status set_clamp(cge_node *f, int64_t qlo, int64_t qhi, bool w_const)
{
    cge_status st = qlo > -1024 ? cge_node_set_int(f, "lo", qlo) : CGE_OK;
    if (!st && qhi < 1024)
        st = cge_node_set_int(f, "hi", qhi);
    if (!st && w_const)
        st = cge_node_set_int(f, "w_const", 1);
    return st;
}

/* ---- Conv / Gemm / MatMul -------------------------------------------------------- */

/* The int32 bias for a conv or gemm: DQ(int32 b) with zero point 0 and scale
 * x_scale * w_scale is taken as it is; a float constant (or any other DQ of
 * constants) is quantized now to that scale. */
static cge_status bias_name(qctx *q, const cge_node *n, int32_t slot, const qparam *xp,
                            const qparam *wp, int64_t M, char *buf, size_t size, const char **out,
                            bool *ok)
{
    *out = "";
    *ok = true;
    int32_t id = cge_node_num_inputs(n) > slot ? cge_node_input_id(n, slot) : -1;
    if (id < 0)
        return CGE_OK;
    int32_t b;
    qparam bp;
    cge_tensor_desc bd;
    if (dq_input(q, n, slot, false, &b, &bp) && !cge_graph_value_desc(q->g, b, &bd) &&
        bd.dtype == CGE_I32 && cge_shape_numel(&bd.shape) == M && cge_graph_value_constant(q->g, b)) {
        bool same = true;
        for (int64_t m = 0; m < M && same; m++) {
            float want = xp->s[0] * wp->s[wp->n == 1 ? 0 : m];
            float have = bp.s[bp.n == 1 ? 0 : m];
            same = zp_value(&bp, bp.n == 1 ? 0 : m) == 0 && fabsf(have - want) <= 1e-6f * want;
        }
        if (same) {
            *out = cge_graph_value_name(q->g, b);
            return CGE_OK;
        }
    }
    /* a float bias: its values, quantized to the accumulator's scale */
    const cge_tensor *c = cge_graph_value_constant(q->g, id);
    if (!c || c->dtype != CGE_F32 || cge_shape_numel(&c->shape) != M) {
        *ok = false;
        return CGE_OK;
    }
    int32_t *v = malloc(sizeof(int32_t) * (size_t)M);
    if (!v)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "fuse_qdq: out of memory");
    for (int64_t m = 0; m < M; m++) {
        double s = (double)xp->s[0] * wp->s[wp->n == 1 ? 0 : m];
        double r = s > 0 ? rint(((const float *)c->data)[m] / s) : 0;
        v[m] = (int32_t)(r > 2e9 ? 2e9 : (r < -2e9 ? -2e9 : r));
    }
    cge_shape sh = CGE_SHAPE(M);
    cge_status st = cc_add_const(q->cc, q->g, "bias_q", CGE_I32, &sh, v, buf, size);
    free(v);
    *out = buf;
    return st;
}

static cge_status try_conv(qctx *q, cge_node *n)
{
    int32_t x, w;
    qparam xp, wp, yp;
    cge_tensor_desc wd;
    if (cge_node_num_outputs(n) != 1 || !dq_input(q, n, 0, true, &x, &xp) ||
        !dq_input(q, n, 1, false, &w, &wp) || !cge_graph_value_constant(q->g, w) ||
        cge_graph_value_desc(q->g, w, &wd) || !is_q8(wd.dtype) || !is_q8(xp.qt) ||
        (wp.n > 1 && (wp.axis != 0 || wp.n != wd.shape.dims[0])))
        return CGE_OK;
    float lo, hi;
    cge_node *act, *qn = q_output(q, cge_node_output_id(n, 0), &act, &lo, &hi);
    if (!qn || !q_params(q, qn, &yp))
        return CGE_OK;
    char bbuf[256], zx[256], zw[256];
    const char *bname, *xz, *wz;
    bool ok;
    cge_status st = bias_name(q, n, 2, &xp, &wp, wd.shape.dims[0], bbuf, sizeof bbuf, &bname, &ok);
    if (st || !ok)
        return st;
    if ((st = zp_name(q, &xp, zx, sizeof zx, &xz)) || (st = zp_name(q, &wp, zw, sizeof zw, &wz)))
        return st == CGE_ERR_UNSUPPORTED ? CGE_OK : st;
    char yz[256];
    const char *yzn;
    if ((st = zp_name(q, &yp, yz, sizeof yz, &yzn)))
        return st == CGE_ERR_UNSUPPORTED ? CGE_OK : st;
    const char *ins[9] = {cge_graph_value_name(q->g, x), cge_graph_value_name(q->g, xp.s_id), xz,
                          cge_graph_value_name(q->g, w), cge_graph_value_name(q->g, wp.s_id), wz,
                          cge_graph_value_name(q->g, yp.s_id), yzn, bname};
    int64_t qlo, qhi;
    clamp_units(&yp, lo, hi, &qlo, &qhi);
    cge_node *nodes[3] = {n, act, qn}, *f = NULL;
    st = replace(q, nodes, 3, qn, "QConv", CGE_DOMAIN_FUSED, ins, bname[0] ? 9 : 8, n, &f);
    return st ? st : set_clamp(f, qlo, qhi, true);
}

/* Gemm(a, w^T [, c]) with alpha = beta = 1 and w [N, K] constant, or MatMul(a,
 * w [K, N] constant, or Transpose(w [N, K]): torch's Linear) with an optional
 * Add of a bias after it: QMatMul with w as [K, N]. */
static cge_status try_matmul(qctx *q, cge_node *n)
{
    bool gemm = cc_is_op(n, "Gemm");
    const cge_attrs *a = cge_node_attrs_const(n);
    if (gemm && (cge_attrs_get_int(a, "transA", 0) || cge_attrs_get_float(a, "alpha", 1.0f) != 1.0f ||
                 cge_attrs_get_float(a, "beta", 1.0f) != 1.0f))
        return CGE_OK;
    int32_t x, w;
    qparam xp, wp, yp;
    cge_tensor_desc wd, xd;
    /* MatMul(x, Transpose(DQ(w))) reads w [N, K] as Gemm's transB does */
    cge_node *tr = NULL;
    if (!gemm && cge_node_num_inputs(n) == 2) {
        cge_node *p = cge_graph_value_producer(q->g, cge_node_input_id(n, 1));
        const int64_t *perm = NULL;
        if (p && cc_is_op(p, "Transpose") &&
            cge_attrs_get_ints(cge_node_attrs_const(p), "perm", &perm) == 2 && perm[0] == 1 &&
            perm[1] == 0 && cc_only_consumer(&q->u, q->g, cge_node_output_id(p, 0)) == n)
            tr = p;
    }
    if (cge_node_num_outputs(n) != 1 || (!gemm && cge_node_num_inputs(n) != 2) ||
        !dq_input(q, n, 0, true, &x, &xp) || !dq_input(q, tr ? tr : n, tr ? 0 : 1, false, &w, &wp) ||
        !cge_graph_value_constant(q->g, w) || cge_graph_value_desc(q->g, w, &wd) ||
        !is_q8(wd.dtype) || wd.shape.rank != 2 || !is_q8(xp.qt) ||
        cge_graph_value_desc(q->g, x, &xd) || xd.shape.rank < 1 || (gemm && xd.shape.rank != 2))
        return CGE_OK;
    bool trans = tr || (gemm && cge_attrs_get_int(a, "transB", 0));
    int64_t K = trans ? wd.shape.dims[1] : wd.shape.dims[0], N = trans ? wd.shape.dims[0] : wd.shape.dims[1];
    if (wp.n > 1 && (wp.n != N || wp.axis != (trans ? 0 : 1)))
        return CGE_OK;
    /* MatMul's bias: an Add alone reading it, of N values */
    cge_node *bias_node = gemm ? n : NULL, *add = NULL;
    int32_t bias_slot = 2, out = cge_node_output_id(n, 0);
    if (!gemm) {
        cge_node *c = cc_only_consumer(&q->u, q->g, out);
        int32_t o = c && cc_is_op(c, "Add") && cge_node_num_inputs(c) == 2 ? cc_other_input(c, out) : -1;
        cge_tensor_desc od;
        if (o >= 0 && o != out && !cge_graph_value_desc(q->g, o, &od) &&
            cge_shape_numel(&od.shape) == N && od.shape.dims[od.shape.rank - 1] == N) {
            add = bias_node = c;
            bias_slot = cge_node_input_id(c, 0) == o ? 0 : 1;
            out = cge_node_output_id(c, 0);
        }
    }
    float lo, hi;
    cge_node *act, *qn = q_output(q, out, &act, &lo, &hi);
    if (!qn || !q_params(q, qn, &yp))
        return CGE_OK;
    char bbuf[256], wbuf[256], zx[256], zw[256], yz[256];
    const char *bname = "", *xz, *wz, *yzn, *wname = cge_graph_value_name(q->g, w);
    bool ok = true;
    cge_status st = CGE_OK;
    if (bias_node && cge_node_num_inputs(bias_node) > bias_slot &&
        cge_node_input_id(bias_node, bias_slot) >= 0) {
        cge_tensor_desc cd = cc_in_desc(q->g, bias_node, bias_slot);
        /* only a per-column bias ([N] or [1, N]) is an int32 bias */
        if (cge_shape_numel(&cd.shape) != N)
            return CGE_OK;
        st = bias_name(q, bias_node, bias_slot, &xp, &wp, N, bbuf, sizeof bbuf, &bname, &ok);
    }
    if (st || !ok)
        return st;
    if (trans) {
        /* bytes: int8 and uint8 alike */
        const uint8_t *src = cge_graph_value_constant(q->g, w)->data;
        uint8_t *t = malloc(K * N > 0 ? (size_t)(K * N) : 1);
        if (!t)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "fuse_qdq: out of memory");
        for (int64_t i = 0; i < N; i++)
            for (int64_t k = 0; k < K; k++)
                t[k * N + i] = src[i * K + k];
        cge_shape sh = CGE_SHAPE(K, N);
        st = cc_add_const(q->cc, q->g, "weight_t", wd.dtype, &sh, t, wbuf, sizeof wbuf);
        free(t);
        wname = wbuf;
        if (st)
            return st;
    }
    if ((st = zp_name(q, &xp, zx, sizeof zx, &xz)) || (st = zp_name(q, &wp, zw, sizeof zw, &wz)) ||
        (st = zp_name(q, &yp, yz, sizeof yz, &yzn)))
        return st == CGE_ERR_UNSUPPORTED ? CGE_OK : st;
    const char *ins[9] = {cge_graph_value_name(q->g, x), cge_graph_value_name(q->g, xp.s_id), xz,
                          wname, cge_graph_value_name(q->g, wp.s_id), wz,
                          cge_graph_value_name(q->g, yp.s_id), yzn, bname};
    int64_t qlo, qhi;
    clamp_units(&yp, lo, hi, &qlo, &qhi);
    cge_node *nodes[5] = {n, act, qn, add, tr}, *f = NULL;
    st = replace(q, nodes, 5, qn, "QMatMul", CGE_DOMAIN_FUSED, ins, bname[0] ? 9 : 8, NULL, &f);
    return st ? st : set_clamp(f, qlo, qhi, true);
}

/* ---- ONNX QLinearConv / QLinearMatMul ------------------------------------------- */

/* Models already in the QOperator form (ONNX Runtime's quantizer with
 * QuantFormat.QOperator, TFLite converters) hold QLinearConv and
 * QLinearMatMul, whose inputs are QConv's and QMatMul's in the same order.
 * Where oneDNN's int8 primitive can take them (W a constant s8 or u8 tensor,
 * its zero points shifted away when the kernel is prepared, x's scale and
 * zero point one constant value, every scale and zero point constant) they
 * become QConv / QMatMul with w_const, so they get
 * the packed-once kernels and the NHWC layout; both run the requantisation
 * float(acc) * (x_scale * w_scale[m] / y_scale) of the reference loops. Any
 * other form gains nothing (QConv would run the same loops) and stays. */
static bool const_input(const qctx *q, const cge_node *n, int32_t slot, cge_dtype want,
                        int64_t count1, int64_t countn)
{
    int32_t id = cge_node_num_inputs(n) > slot ? cge_node_input_id(n, slot) : -1;
    const cge_tensor *c = id >= 0 ? cge_graph_value_constant(q->g, id) : NULL;
    if (!c || (want != CGE_DTYPE_UNDEFINED && c->dtype != want))
        return false;
    int64_t k = cge_shape_numel(&c->shape);
    return k == count1 || k == countn;
}

static cge_status try_qlinear(qctx *q, cge_node *n, bool conv)
{
    int32_t ni = cge_node_num_inputs(n);
    if (cge_node_num_outputs(n) != 1 || ni < 8 || ni > 9 || (!conv && ni != 8))
        return CGE_OK;
    int32_t w = cge_node_input_id(n, 3), x = cge_node_input_id(n, 0);
    const cge_tensor *wc = w >= 0 ? cge_graph_value_constant(q->g, w) : NULL;
    cge_tensor_desc xd, yd = cc_out_desc(q->g, n, 0);
    if (!wc || !is_q8(wc->dtype) || x < 0 || cge_graph_value_desc(q->g, x, &xd) ||
        !is_q8(xd.dtype) || !is_q8(yd.dtype) || !cge_shape_is_static(&xd.shape))
        return CGE_OK;
    /* the per-channel count: conv's M = W[0], matmul's N = B[1] */
    int64_t per;
    if (conv)
        per = wc->shape.rank >= 3 ? wc->shape.dims[0] : -1;
    else
        per = wc->shape.rank == 2 ? wc->shape.dims[1] : -1;
    if (per < 1 || !const_input(q, n, 1, CGE_F32, 1, 1) || !const_input(q, n, 2, xd.dtype, 1, 1) ||
        !const_input(q, n, 4, CGE_F32, 1, per) || !const_input(q, n, 5, CGE_DTYPE_UNDEFINED, 1, per) ||
        !const_input(q, n, 6, CGE_F32, 1, 1) || !const_input(q, n, 7, yd.dtype, 1, 1))
        return CGE_OK;
    if (cc_in_desc(q->g, n, 5).dtype != wc->dtype)
        return CGE_OK;
    if (ni == 9 && cge_node_input_id(n, 8) >= 0 && !const_input(q, n, 8, CGE_I32, per, per))
        return CGE_OK;
    /* a new node takes n's inputs, attributes and (once n is gone) output */
    char in_names[9][256], out_name[256], tmp[256], name[256];
    const char *ins[9];
    for (int32_t i = 0; i < ni; i++) {
        snprintf(in_names[i], sizeof in_names[i], "%s", cge_node_input(n, i) ? cge_node_input(n, i) : "");
        ins[i] = in_names[i];
    }
    snprintf(out_name, sizeof out_name, "%s", cge_node_output(n, 0));
    const char *op = conv ? "QConv" : "QMatMul";
    cc_fresh_name(q->cc, q->g, op, name, sizeof name);
    cc_fresh_name(q->cc, q->g, "qlinear_out", tmp, sizeof tmp);
    const char *outs[1] = {tmp};
    cge_node *f = NULL;
    cge_status st = cge_graph_add_node(q->g, op, CGE_DOMAIN_FUSED, name, ins, ni, outs, 1, &f);
    if (!st && conv)
        st = cc_copy_attrs(f, n);
    if (!st)
        st = cge_graph_remove_node(q->g, n);
    if (!st)
        st = cge_node_set_output(f, 0, out_name);
    if (!st)
        st = cge_graph_set_desc(q->g, out_name, yd.dtype, &yd.shape);
    if (!st)
        st = cge_node_set_int(f, "w_const", 1);
    if (!st) {
        q->cc->fused++;
        q->cc->removed++;
        q->cc->added++;
        st = cc_uses_add_node(&q->u, f);
    }
    return st;
}

/* ---- elementwise, pooling, views ------------------------------------------------- */

static cge_status try_binary(qctx *q, cge_node *n, const char *op)
{
    int32_t a, b;
    qparam ap, bp, yp;
    cge_tensor_desc ad, bd;
    if (cge_node_num_inputs(n) != 2 || cge_node_num_outputs(n) != 1 ||
        !dq_input(q, n, 0, true, &a, &ap) || !dq_input(q, n, 1, true, &b, &bp) ||
        !is_q8(ap.qt) || !is_q8(bp.qt) || cge_graph_value_desc(q->g, a, &ad) ||
        cge_graph_value_desc(q->g, b, &bd) ||
        !(cge_shape_equal(&ad.shape, &bd.shape) || cge_shape_numel(&bd.shape) == 1))
        return CGE_OK;
    float lo, hi;
    cge_node *act, *qn = q_output(q, cge_node_output_id(n, 0), &act, &lo, &hi);
    if (!qn || !q_params(q, qn, &yp))
        return CGE_OK;
    char za[256], zb[256], zy[256];
    const char *azn, *bzn, *yzn;
    cge_status st;
    if ((st = zp_name(q, &ap, za, sizeof za, &azn)) || (st = zp_name(q, &bp, zb, sizeof zb, &bzn)) ||
        (st = zp_name(q, &yp, zy, sizeof zy, &yzn)))
        return st == CGE_ERR_UNSUPPORTED ? CGE_OK : st;
    const char *ins[8] = {cge_graph_value_name(q->g, a), cge_graph_value_name(q->g, ap.s_id), azn,
                          cge_graph_value_name(q->g, b), cge_graph_value_name(q->g, bp.s_id), bzn,
                          cge_graph_value_name(q->g, yp.s_id), yzn};
    int64_t qlo, qhi;
    clamp_units(&yp, lo, hi, &qlo, &qhi);
    cge_node *nodes[3] = {n, act, qn}, *f = NULL;
    st = replace(q, nodes, 3, qn, op, CGE_DOMAIN_FUSED, ins, 8, NULL, &f);
    return st ? st : set_clamp(f, qlo, qhi, false);
}

static cge_status try_pool(qctx *q, cge_node *n, const char *mode)
{
    int32_t x;
    qparam xp, yp;
    cge_tensor_desc xd;
    if (cge_node_num_outputs(n) != 1 || !dq_input(q, n, 0, true, &x, &xp) || !is_q8(xp.qt) ||
        cge_graph_value_desc(q->g, x, &xd) || xd.shape.rank != 4)
        return CGE_OK;
    if (!strcmp(mode, "max") && cge_attrs_get_int(cge_node_attrs_const(n), "storage_order", 0))
        return CGE_OK;
    cge_node *next = cc_only_consumer(&q->u, q->g, cge_node_output_id(n, 0));
    if (!next || !cc_is_op(next, "QuantizeLinear") || !q_params(q, next, &yp))
        return CGE_OK;
    char zx[256], zy[256];
    const char *xzn, *yzn;
    cge_status st;
    if ((st = zp_name(q, &xp, zx, sizeof zx, &xzn)) || (st = zp_name(q, &yp, zy, sizeof zy, &yzn)))
        return st == CGE_ERR_UNSUPPORTED ? CGE_OK : st;
    const char *ins[5] = {cge_graph_value_name(q->g, x), cge_graph_value_name(q->g, xp.s_id), xzn,
                          cge_graph_value_name(q->g, yp.s_id), yzn};
    cge_node *nodes[2] = {n, next}, *f = NULL;
    st = replace(q, nodes, 2, next, "QPool", CGE_DOMAIN_FUSED, ins, 5, n, &f);
    if (!st)
        st = cge_node_set_string(f, "mode", mode);
    return st;
}

/* A view or Concat whose inputs are DQ's and whose one reader is a Q, all
 * with one scale and zero point: the op moves int8 bytes instead. */
static cge_status try_passthrough(qctx *q, cge_node *n)
{
    bool concat = cc_is_op(n, "Concat");
    int32_t ni = cge_node_num_inputs(n);
    if (cge_node_num_outputs(n) != 1 || ni < 1 || ni > 64)
        return CGE_OK;
    cge_node *next = cc_only_consumer(&q->u, q->g, cge_node_output_id(n, 0));
    qparam yp;
    if (!next || !cc_is_op(next, "QuantizeLinear") || !q_params(q, next, &yp))
        return CGE_OK;
    const char *ins[64];
    for (int32_t i = 0; i < ni; i++) {
        int32_t x;
        qparam xp;
        if (!concat && i > 0) { /* Reshape's shape and the like stay */
            ins[i] = cge_node_input(n, i);
            continue;
        }
        if (!dq_input(q, n, i, true, &x, &xp) || !params_equal(&xp, &yp))
            return CGE_OK;
        ins[i] = cge_graph_value_name(q->g, x);
    }
    cge_node *nodes[2] = {n, next};
    char op[64];
    snprintf(op, sizeof op, "%s", cge_node_op_type(n));
    return replace(q, nodes, 2, next, op, "", ins, ni, n, NULL);
}

/* Unary f between DQ and Q: a 256-entry table Q(f(DQ(v))), f evaluated now by
 * its own kernel (the same bits as the unfused run). */
static cge_status try_unary(qctx *q, cge_node *n)
{
    int32_t x;
    qparam xp, yp;
    if (cge_node_num_outputs(n) != 1 || !dq_input(q, n, 0, true, &x, &xp) || !is_q8(xp.qt))
        return CGE_OK;
    for (int32_t i = 1; i < cge_node_num_inputs(n); i++)
        if (cge_node_input_id(n, i) >= 0 && !cc_input_const(q->g, n, i))
            return CGE_OK;
    cge_node *next = cc_only_consumer(&q->u, q->g, cge_node_output_id(n, 0));
    if (!next || !cc_is_op(next, "QuantizeLinear") || !q_params(q, next, &yp))
        return CGE_OK;
    const cge_op_def *def = cc_find_op(q->cc, n);
    const cge_kernel_def *k = def ? cge_op_find_kernel(def, "cpu", CGE_F32) : NULL;
    if (!k) {
        cge_clear_error();
        return CGE_OK;
    }
    float in[256];
    for (int v = 0; v < 256; v++) {
        int32_t qv = xp.qt == CGE_I8 ? (int32_t)(int8_t)(uint8_t)v : v;
        in[v] = (float)((int64_t)qv - zp_value(&xp, 0)) * xp.s[0];
    }
    cge_tensor ins[8];
    int32_t ni = cge_node_num_inputs(n);
    if (ni > 8)
        return CGE_OK;
    ins[0] = (cge_tensor){.dtype = CGE_F32, .shape = CGE_SHAPE(256), .data = in};
    for (int32_t i = 1; i < ni; i++) {
        const cge_tensor *c = cc_input_const(q->g, n, i);
        ins[i] = c ? *c : (cge_tensor){.dtype = CGE_DTYPE_UNDEFINED};
    }
    cge_tensor_desc od = {.name = cge_node_output(n, 0), .dtype = CGE_F32, .shape = CGE_SHAPE(256)};
    void *host[1] = {NULL};
    if (cc_evaluate_node(q->cc, n, k, ins, &od, host)) {
        cge_clear_error();
        free(host[0]);
        return CGE_OK;
    }
    uint8_t table[256];
    const float *f = host[0];
    float s = yp.s[0], z = (float)zp_value(&yp, 0);
    for (int v = 0; v < 256; v++) /* QuantizeLinear's arithmetic, as quant.c has it */
        cge__q8_store_sat(table, yp.qt == CGE_I8, v, cge__q8_quantize(f[v], s, z));
    free(host[0]);
    char tname[256];
    cge_shape sh = CGE_SHAPE(256);
    cge_status st = cc_add_const(q->cc, q->g, "table", yp.qt, &sh, table, tname, sizeof tname);
    if (st)
        return st;
    const char *tin[2] = {cge_graph_value_name(q->g, x), tname};
    cge_node *nodes[2] = {n, next};
    return replace(q, nodes, 2, next, "QLookup", CGE_DOMAIN_FUSED, tin, 2, NULL, NULL);
}

/* A QLookup whose table only clamps (t[v] = clamp(v, a, b) over the input
 * dtype) and whose input comes from a QConv / QAdd read by nothing else: the
 * clamp joins theirs (mobilenet's Conv -> Q -> DQ -> Clip(0, 6) -> Q). */
static cge_status fold_clamps(qctx *q)
{
    int32_t nn = cge_graph_num_nodes(q->g);
    for (int32_t i = 0; i < nn; i++) {
        cge_node *n = cge_graph_node(q->g, i);
        if (!n || cge_node_is_removed(n) || strcmp(cge_node_op_type(n), "QLookup") ||
            strcmp(cge_node_domain(n), CGE_DOMAIN_FUSED))
            continue;
        int32_t x = cge_node_input_id(n, 0);
        cge_node *p = cge_graph_value_producer(q->g, x);
        const cge_tensor *t = cc_input_const(q->g, n, 1);
        if (!p || !t || strcmp(cge_node_domain(p), CGE_DOMAIN_FUSED) ||
            (strcmp(cge_node_op_type(p), "QConv") && strcmp(cge_node_op_type(p), "QAdd")) ||
            cc_only_consumer(&q->u, q->g, x) != n || cge_graph_value_is_output(q->g, x) ||
            t->dtype != cc_out_desc(q->g, p, 0).dtype)
            continue;
        bool sg = t->dtype == CGE_I8;
        int32_t a = 1024, b = -1024;
        bool clamp = true;
        for (int v = 0; v < 256 && clamp; v++) {
            int32_t in = sg ? (int8_t)(uint8_t)v : v;
            int32_t out = sg ? ((const int8_t *)t->data)[v] : ((const uint8_t *)t->data)[v];
            if (out != in) {
                if (out > in)
                    a = a == 1024 || out == a ? out : -2048;
                else
                    b = b == -1024 || out == b ? out : 2048;
                clamp = a != -2048 && b != 2048;
            }
        }
        /* out == in except below a (out = a) and above b (out = b) */
        for (int v = 0; v < 256 && clamp; v++) {
            int32_t in = sg ? (int8_t)(uint8_t)v : v;
            int32_t out = sg ? ((const int8_t *)t->data)[v] : ((const uint8_t *)t->data)[v];
            int32_t want = in;
            if (a != 1024 && in < a)
                want = a;
            if (b != -1024 && in > b)
                want = b;
            clamp = out == want;
        }
        if (!clamp)
            continue;
        const cge_attrs *pa = cge_node_attrs_const(p);
        int64_t lo = cge_attrs_get_int(pa, "lo", -1024), hi = cge_attrs_get_int(pa, "hi", 1024);
        if (a != 1024 && a > lo)
            lo = a;
        if (b != -1024 && b < hi)
            hi = b;
        char out[256];
        snprintf(out, sizeof out, "%s", cge_node_output(n, 0));
        cge_status st = cge_graph_remove_node(q->g, n);
        if (!st)
            st = cge_node_set_output(p, 0, out);
        if (!st && lo > -1024)
            st = cge_node_set_int(p, "lo", lo);
        if (!st && hi < 1024)
            st = cge_node_set_int(p, "hi", hi);
        if (st)
            return st;
        q->cc->removed++;
        q->cc->fused++;
    }
    return CGE_OK;
}

/* ---- clamped outputs with zero point 0 ----------------------------------------- */

/* Where input `slot` of fused node n is read as (v - zero point) only, the
 * slot of that zero point: QConv / QMatMul's x, QAdd / QMul's A and B. */
static bool zp_reader(const cge_node *n, int32_t slot, int32_t *zslot)
{
    if (strcmp(cge_node_domain(n), CGE_DOMAIN_FUSED))
        return false;
    const char *op = cge_node_op_type(n);
    if ((!strcmp(op, "QConv") || !strcmp(op, "QMatMul")) && slot == 0)
        *zslot = 2;
    else if ((!strcmp(op, "QAdd") || !strcmp(op, "QMul")) && (slot == 0 || slot == 3))
        *zslot = slot + 2;
    else
        return false;
    return true;
}

static bool zp_const(const qctx *q, const cge_node *n, int32_t slot, cge_dtype t, int32_t *z)
{
    const cge_tensor *c = cc_input_const(q->g, n, slot);
    if (!c || c->dtype != t || cge_shape_numel(&c->shape) != 1)
        return false;
    *z = cge__q_load(c->data, t, 0);
    return true;
}

/* A QConv / QMatMul / QAdd / QMul whose clamp keeps the real values >= 0
 * (lo >= the output's zero point z: a Relu or ReLU6 folded in, as torch's
 * exports of mobilenet_v2 write them, quantized before the ReLU6) writes
 * v - z with zero point 0 instead of v with z, when every reader takes
 * (v - zero point) only. The values stand for the same reals and every
 * reader computes the same integers (exact), but the convolutions reading
 * them and the one writing them lose a zero point: oneDNN's int8 kernels
 * without source zero points (its brgemm ones, depthwise included) are the
 * faster ones, and a destination zero point costs post-ops of its own. */
static cge_status rezero_clamped(qctx *q)
{
    int32_t nn = cge_graph_num_nodes(q->g);
    for (int32_t i = 0; i < nn; i++) {
        cge_node *p = cge_graph_node(q->g, i);
        int32_t zs, z;
        if (!p || cge_node_is_removed(p) || cge_node_num_outputs(p) != 1 ||
            cge_node_num_inputs(p) < 8 || !zp_reader(p, 0, &zs))
            continue;
        const cge_attrs *pa = cge_node_attrs_const(p);
        int64_t lo = cge_attrs_get_int(pa, "lo", -1024), hi = cge_attrs_get_int(pa, "hi", 1024);
        int32_t y = cge_node_output_id(p, 0);
        cge_dtype t = cc_out_desc(q->g, p, 0).dtype;
        int64_t top = t == CGE_I8 ? 127 : 255;
        if (!is_q8(t) || !zp_const(q, p, 7, t, &z) || z == 0 || lo < z ||
            (hi < top ? hi : top) - z > top || cge_graph_value_is_output(q->g, y))
            continue;
        cc_use uses[32];
        int32_t nu = cc_uses_count(&q->u, y);
        if (nu < 1 || nu > 32)
            continue;
        cc_uses_list(&q->u, y, uses, nu);
        bool ok = true;
        for (int32_t k = 0; k < nu && ok; k++) {
            int32_t rz;
            ok = zp_reader(uses[k].node, uses[k].slot, &zs) &&
                 zp_const(q, uses[k].node, zs, t, &rz) && rz == z;
        }
        if (!ok)
            continue;
        const cge_tensor *old = cc_input_const(q->g, p, 7);
        int64_t zero = 0;
        char zname[256];
        cge_status st = cc_add_const(q->cc, q->g, "zero_point", t, &old->shape, &zero, zname,
                                     sizeof zname);
        if (!st)
            st = cge_node_set_input(p, 7, zname);
        if (!st)
            st = cc_uses_add(&q->u, p, 7);
        for (int32_t k = 0; k < nu && !st; k++) {
            zp_reader(uses[k].node, uses[k].slot, &zs);
            st = cge_node_set_input(uses[k].node, zs, zname);
            if (!st)
                st = cc_uses_add(&q->u, uses[k].node, zs);
        }
        /* [lo, hi] moves with the values; the dtype's top, which saturation
         * kept, becomes a clamp of its own */
        if (!st)
            st = cge_node_set_int(p, "lo", lo - z);
        if (!st)
            st = cge_node_set_int(p, "hi", (hi < top ? hi : top) - z);
        if (st)
            return st;
    }
    return CGE_OK;
}

/* ---- elementwise chains -------------------------------------------------------- */

/* DQ x -> a graph of elementwise float ops on x alone (each other operand a
 * one-element constant) -> one Q: torch's exports spell GELU, SiLU and
 * HardSwish so (Div, Erf, Add, Mul, Mul), and fuse_gelu only comes later. The
 * graph is a function of x's 256 values: a QLookup table made now by running
 * each node's own kernel on them in order, then QuantizeLinear's arithmetic
 * (the same bits as the unfused run, as for one unary op). */
#define CHAIN_MAX 16

static bool chain_op(const cge_node *n)
{
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Erf", "Tanh", "Sigmoid",
                                      "Relu", "Exp", "Neg", "Abs", "Sqrt", "Clip", "HardSigmoid",
                                      "HardSwish", "LeakyRelu", "Softplus", "Elu", "Gelu", "Pow",
                                      "Min", "Max"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (cc_is_op(n, ops[i]))
            return cge_node_num_outputs(n) == 1;
    return false;
}

static int chain_index(const int32_t *vals, int nv, int32_t id)
{
    for (int i = 0; i < nv; i++)
        if (vals[i] == id)
            return i;
    return -1;
}

static cge_status try_chain(qctx *q, cge_node *dq)
{
    int32_t x = through_casts(q, cge_node_input_id(dq, 0)), d = cge_node_output_id(dq, 0);
    cge_tensor_desc xd, dd;
    qparam xp, yp;
    if (x < 0 || cge_graph_value_constant(q->g, x) || cge_graph_value_desc(q->g, x, &xd) ||
        !is_q8(xd.dtype) || !read_params(q, dq, xd.dtype, &xp) || xp.n != 1 ||
        cge_graph_value_desc(q->g, d, &dd) || dd.dtype != CGE_F32)
        return CGE_OK;
    /* the nodes reachable from d, each value read only inside, but one, read by a Q alone */
    cge_node *S[CHAIN_MAX], *qn = NULL;
    int32_t vals[CHAIN_MAX + 1] = {d}, o = -1;
    int ns = 0, nv = 1;
    for (int vi = 0; vi < nv; vi++) {
        int32_t v = vals[vi];
        cc_use uses[8];
        int32_t nu = cc_uses_count(&q->u, v);
        if (nu < 1 || nu > 8 || cge_graph_value_is_output(q->g, v))
            return CGE_OK;
        cc_uses_list(&q->u, v, uses, 8);
        for (int32_t k = 0; k < nu; k++) {
            cge_node *c = uses[k].node;
            if (cc_is_op(c, "QuantizeLinear")) {
                if (qn || uses[k].slot != 0 || nu != 1)
                    return CGE_OK;
                qn = c, o = v;
                continue;
            }
            bool seen = false;
            for (int j = 0; j < ns && !seen; j++)
                seen = S[j] == c;
            if (seen)
                continue;
            cge_tensor_desc cd = cc_out_desc(q->g, c, 0);
            if (!chain_op(c) || ns == CHAIN_MAX || cd.dtype != CGE_F32 ||
                !cge_shape_equal(&cd.shape, &dd.shape))
                return CGE_OK;
            S[ns++] = c;
            vals[nv++] = cge_node_output_id(c, 0);
        }
    }
    if (!qn || ns == 0 || !q_params(q, qn, &yp))
        return CGE_OK;
    for (int j = 0; j < ns; j++)
        for (int32_t i = 0; i < cge_node_num_inputs(S[j]); i++) {
            int32_t id = cge_node_input_id(S[j], i);
            const cge_tensor *c = id >= 0 ? cge_graph_value_constant(q->g, id) : NULL;
            if (id >= 0 && chain_index(vals, nv, id) < 0 && !(c && cge_shape_numel(&c->shape) == 1))
                return CGE_OK;
        }
    /* evaluate in dependency order: buffers per value, vals[0] = DQ(v) */
    float *buf[CHAIN_MAX + 1] = {NULL};
    bool done[CHAIN_MAX] = {false};
    cge_status st = CGE_OK;
    bool ok = (buf[0] = malloc(sizeof(float) * 256)) != NULL;
    for (int v = 0; ok && v < 256; v++) {
        int32_t qv = xd.dtype == CGE_I8 ? (int32_t)(int8_t)(uint8_t)v : v;
        buf[0][v] = (float)((int64_t)qv - zp_value(&xp, 0)) * xp.s[0];
    }
    for (int round = 0; ok && round < ns; round++) {
        int j = -1;
        for (int c = 0; c < ns && j < 0; c++) {
            if (done[c])
                continue;
            bool ready = true;
            for (int32_t i = 0; i < cge_node_num_inputs(S[c]) && ready; i++) {
                int vi = chain_index(vals, nv, cge_node_input_id(S[c], i));
                ready = vi < 0 || buf[vi];
            }
            if (ready)
                j = c;
        }
        const cge_op_def *def = j >= 0 ? cc_find_op(q->cc, S[j]) : NULL;
        const cge_kernel_def *k = def ? cge_op_find_kernel(def, "cpu", CGE_F32) : NULL;
        int32_t ni = j >= 0 ? cge_node_num_inputs(S[j]) : 0;
        if (!k || ni > 8) {
            ok = false;
            break;
        }
        cge_tensor ins[8];
        for (int32_t i = 0; i < ni; i++) {
            int32_t id = cge_node_input_id(S[j], i);
            int vi = id >= 0 ? chain_index(vals, nv, id) : -1;
            const cge_tensor *c = id >= 0 && vi < 0 ? cge_graph_value_constant(q->g, id) : NULL;
            ins[i] = vi >= 0 ? (cge_tensor){.dtype = CGE_F32, .shape = CGE_SHAPE(256), .data = buf[vi]}
                     : c     ? *c
                             : (cge_tensor){.dtype = CGE_DTYPE_UNDEFINED};
        }
        cge_tensor_desc od = {.name = cge_node_output(S[j], 0), .dtype = CGE_F32,
                              .shape = CGE_SHAPE(256)};
        void *host[1] = {NULL};
        if (cc_evaluate_node(q->cc, S[j], k, ins, &od, host)) {
            free(host[0]);
            ok = false;
            break;
        }
        buf[chain_index(vals, nv, cge_node_output_id(S[j], 0))] = host[0];
        done[j] = true;
    }
    int oi = chain_index(vals, nv, o);
    if (ok && oi >= 0 && buf[oi]) {
        uint8_t table[256];
        float ys = yp.s[0], yz = (float)zp_value(&yp, 0);
        for (int v = 0; v < 256; v++)
            cge__q8_store_sat(table, yp.qt == CGE_I8, v, cge__q8_quantize(buf[oi][v], ys, yz));
        char tname[256];
        cge_shape sh = CGE_SHAPE(256);
        st = cc_add_const(q->cc, q->g, "table", yp.qt, &sh, table, tname, sizeof tname);
        const char *tin[2] = {cge_graph_value_name(q->g, x), tname};
        cge_node *nodes[CHAIN_MAX + 2];
        nodes[0] = dq;
        for (int j = 0; j < ns; j++)
            nodes[1 + j] = S[j];
        nodes[1 + ns] = qn;
        if (!st)
            st = replace(q, nodes, ns + 2, qn, "QLookup", CGE_DOMAIN_FUSED, tin, 2, NULL, NULL);
    } else {
        cge_clear_error();
    }
    for (int i = 0; i < nv; i++)
        free(buf[i]);
    return st;
}

static cge_status tabulate_chains(qctx *q)
{
    int32_t nn = cge_graph_num_nodes(q->g);
    cge_status st = CGE_OK;
    for (int32_t i = 0; i < nn && !st; i++) {
        cge_node *n = cge_graph_node(q->g, i);
        if (n && !cge_node_is_removed(n) && cc_is_op(n, "DequantizeLinear") &&
            cge_node_num_inputs(n) >= 2 && cge_node_num_outputs(n) == 1)
            st = try_chain(q, n);
    }
    return st;
}

/* The DequantizeLinear nodes the fusions left (where int8 data goes back to
 * float: attention, LayerNorm, the outputs): per tensor, of an int8
 * activation, they become QLookup with a float32 table of the 256 values computed
 * with DequantizeLinear's own arithmetic (quant.c: (float)(v - z) * s). */
static cge_status tabulate_dequantize(qctx *q)
{
    int32_t nn = cge_graph_num_nodes(q->g);
    for (int32_t i = 0; i < nn; i++) {
        cge_node *n = cge_graph_node(q->g, i);
        if (!n || cge_node_is_removed(n) || !cc_is_op(n, "DequantizeLinear") ||
            cge_node_num_inputs(n) < 2 || cge_node_num_outputs(n) != 1)
            continue;
        int32_t x = cge_node_input_id(n, 0);
        cge_tensor_desc xd;
        qparam p;
        if (x < 0 || cge_graph_value_constant(q->g, x) || cge_graph_value_desc(q->g, x, &xd) ||
            !is_q8(xd.dtype) || !read_params(q, n, xd.dtype, &p) || p.n != 1)
            continue;
        float table[256];
        for (int v = 0; v < 256; v++) {
            int32_t qv = xd.dtype == CGE_I8 ? (int32_t)(int8_t)(uint8_t)v : v;
            table[v] = (float)((int64_t)qv - zp_value(&p, 0)) * p.s[0];
        }
        char tname[256];
        cge_shape sh = CGE_SHAPE(256);
        cge_status st = cc_add_const(q->cc, q->g, "dq_table", CGE_F32, &sh, table, tname,
                                     sizeof tname);
        const char *ins[2] = {cge_graph_value_name(q->g, x), tname};
        cge_node *nodes[1] = {n};
        if (!st)
            st = replace(q, nodes, 1, n, "QLookup", CGE_DOMAIN_FUSED, ins, 2, NULL, NULL);
        if (st)
            return st;
        q->cc->fused--; /* one node for one: a rewrite, not a fusion */
    }
    return CGE_OK;
}

static bool is_unary(const cge_node *n)
{
    static const char *const ops[] = {"Relu", "Clip", "Sigmoid", "HardSwish", "HardSigmoid",
                                      "LeakyRelu", "Tanh", "Elu", "Gelu", "Softplus", "Neg",
                                      "Abs", "Erf", "Exp"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (cc_is_op(n, ops[i]))
            return true;
    return false;
}

cge_status cc_pass_fuse_qdq(cc_ctx *ctx, cge_graph *g)
{
    qctx q = {.cc = ctx, .g = g};
    cge_status st = cc_fold_constants_keeping(ctx, g, "DequantizeLinear");
    if (st)
        return st;
    q.use_known = ctx->known && ctx->known_rev == cge_graph_revision(g);
    st = cc_uses_build(&q.u, g);
    if (st)
        return st;
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (!n || cge_node_is_removed(n))
            continue;
        if (cc_is_op(n, "Conv"))
            st = try_conv(&q, n);
        else if (cc_is_op(n, "Gemm") || cc_is_op(n, "MatMul"))
            st = try_matmul(&q, n);
        else if (cc_is_op(n, "QLinearConv") || cc_is_op(n, "QLinearMatMul"))
            st = try_qlinear(&q, n, cc_is_op(n, "QLinearConv"));
        else if (cc_is_op(n, "Add"))
            st = try_binary(&q, n, "QAdd");
        else if (cc_is_op(n, "Mul"))
            st = try_binary(&q, n, "QMul");
        else if (cc_is_op(n, "MaxPool") && cge_node_num_outputs(n) == 1)
            st = try_pool(&q, n, "max");
        else if (cc_is_op(n, "AveragePool"))
            st = try_pool(&q, n, "avg");
        else if (cc_is_op(n, "GlobalAveragePool"))
            st = try_pool(&q, n, "global_avg");
        else if (cc_is_view_op(n) || cc_is_op(n, "Concat"))
            st = try_passthrough(&q, n);
        else if (is_unary(n))
            st = try_unary(&q, n);
    }
    /* The DQs (and Casts) the rewrites left unread go first, so that a
     * QLookup is seen as its producer's only reader. */
    cc_uses_free(&q.u);
    if (!st)
        st = cc_pass_dce(ctx, g);
    if (!st && !(st = cc_uses_build(&q.u, g))) {
        st = tabulate_chains(&q);
        if (!st)
            st = fold_clamps(&q);
        if (!st)
            st = tabulate_dequantize(&q);
        if (!st)
            st = rezero_clamped(&q);
        cc_uses_free(&q.u);
    }
    /* descriptors and values the inference kept no longer describe the graph */
    cc_forget_known(ctx);
    return st;
}
