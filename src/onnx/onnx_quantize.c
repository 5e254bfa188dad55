/* cge_onnx_quantize: a float ONNX model becomes a QDQ model (ONNX Runtime's
 * conventions, so that its QDQ fusions and cge's recognise it) or, with
 * weights_only_bits, one whose constant-weight MatMuls are com.microsoft
 * MatMulNBits. Decisions are made on the protobuf-c view of the model; the
 * output re-emits the original bytes of everything not rewritten. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/strmap.h"
#include "onnx/onnx_internal.h"
#include "onnx/onnx_quant.h"
#include "onnx/onnx_write.h"

/* ---- what the rewrite decides, per value and per node ------------------- */

enum { V_NONE = 0, V_QDQ = 1, V_ALIAS = 2 };          /* value states */
enum { N_KEEP = 0, N_QUANT = 1, N_FOLDED = 2, N_NBITS = 3 };

typedef struct qval {
    const char *name;
    int32_t producer, producer_slot;   /* -1: none */
    int32_t init;                      /* initializer index, -1 */
    int32_t cinit;                     /* the initializer it is, directly or through Identity */
    bool is_input, is_output;
    int32_t uses;                      /* node inputs reading it (main graph) */
    int state;
    int32_t range_of;                  /* value whose calibrated range it takes */
    int32_t alias_of;                  /* V_ALIAS: the value whose DQ produces it */
    const char *q_src, *dq_name;       /* V_QDQ: Q input and DQ output names */
    float scale;
    uint8_t zp;                        /* uint8, or int8's bits (activation_type 1, 2) */
    int32_t fold_to;                   /* a Relu/Clip folded into its range: its output */
    int32_t renamed_uses;              /* initializer uses now reading a DequantizeLinear */
} qval;

typedef struct qnode {
    int kind;
    const char **in_name;              /* per input: replacement or NULL */
    const char **out_name;             /* per output: replacement or NULL */
    uint64_t qslots;                   /* inputs read through DequantizeLinear */
    int32_t nbits;                     /* N_NBITS: its weight record */
} qnode;

/* A constant stored as integers with its DequantizeLinear (or MatMulNBits'
 * packed inputs). */
typedef struct qweight {
    int32_t init;
    int axis;                          /* -1: per tensor */
    int kind;                          /* 0 s8 symmetric, 1 u8 asymmetric, 2 int32 bias */
    float x_scale;                     /* bias: the input's scale */
    int32_t wscale_of;                 /* bias: the weight record giving w_scale */
    const char *dq_out;                /* DQ output (or, MatMulNBits: unused) */
    const char *q_name, *s_name, *z_name;
    cge_tensor q;                      /* the integer data (malloc'd) */
    float *scales;
    int64_t n_scales;
    void *zps;
    size_t zp_bytes;
    cge_dtype zp_dtype;
    int64_t dims_q[4];                 /* MatMulNBits B: [N, blocks, blob]; blocked DQ: [K, N] */
    int rank_q;
    int64_t block;                     /* kind 4 (blocked DQ, opset 21): block_size along axis 0 */
} qweight;

typedef struct qctx {
    const char *label;
    const cge_quantize_options *o;
    onnx_ctx cx;
    const uint8_t *data;
    size_t size;
    const char *base_dir;
    Onnx__ModelProto *m;
    Onnx__GraphProto *g;
    int64_t opset, opset_out;
    bool upgrade_reduce;               /* main-graph Reduce* rewritten to 18's axes input */
    cge__strmap vmap;                  /* value name -> index */
    cge__strmap taken;                 /* every name in use (values, nodes) */
    qval *v;
    int32_t nv, cap_v;
    qnode *n;
    qweight *w;
    int32_t nw, cap_w;
    char **strs;                       /* generated names, freed at the end */
    int32_t nstrs, cap_strs;
    cge_tensor *inits;                 /* decoded float initializers (lazily) */
    bool has_subgraphs;
    cge_quantize_report *rep;
} qctx;

static cge_status oom(void)
{
    return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "quantize: out of memory");
}

static bool grow(void **p, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    int32_t c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return false;
    memset((char *)q + (size_t)*cap * elem, 0, (size_t)(c - *cap) * elem);
    *p = q;
    *cap = c;
    return true;
}

/* A fresh name "<base><suffix>" (with _2, _3, ... if taken), remembered as taken. */
static const char *fresh(qctx *q, const char *base, const char *suffix)
{
    size_t len = strlen(base) + strlen(suffix) + 16;
    char *s = malloc(len);
    if (!s || !grow((void **)&q->strs, &q->cap_strs, q->nstrs + 1, sizeof(char *))) {
        free(s);
        return NULL;
    }
    snprintf(s, len, "%s%s", base, suffix);
    for (int k = 2; cge__strmap_get(&q->taken, s) >= 0; k++)
        snprintf(s, len, "%s%s_%d", base, suffix, k);
    q->strs[q->nstrs++] = s;
    if (!cge__strmap_put(&q->taken, s, 1))
        return NULL;
    return s;
}

static int32_t value_of(qctx *q, const char *name)
{
    if (!name || !name[0])
        return -1;
    int32_t i = cge__strmap_get(&q->vmap, name);
    if (i >= 0)
        return i;
    if (!grow((void **)&q->v, &q->cap_v, q->nv + 1, sizeof(qval)))
        return -2;
    qval *x = &q->v[q->nv];
    memset(x, 0, sizeof *x);
    x->name = name;
    x->producer = x->producer_slot = x->init = x->cinit = x->range_of = x->alias_of = x->fold_to = -1;
    if (!cge__strmap_put(&q->vmap, name, q->nv) || !cge__strmap_put(&q->taken, name, 1))
        return -2;
    return q->nv++;
}

static bool is_default_domain(const char *d) { return !d || !d[0] || !strcmp(d, "ai.onnx"); }

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t i = 0; i < np->n_attribute; i++)
        if (np->attribute[i] && np->attribute[i]->name && !strcmp(np->attribute[i]->name, name))
            return np->attribute[i];
    return NULL;
}

static int64_t attr_int(const Onnx__NodeProto *np, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = attr(np, name);
    return a && a->has_i ? a->i : dflt;
}

/* The float32 initializer `idx`, decoded once. NULL with an error set if it
 * cannot be decoded. */
static const cge_tensor *init_tensor(qctx *q, int32_t idx)
{
    cge_tensor *t = &q->inits[idx];
    if (t->data)
        return t;
    if (cge__onnx_decode_tensor(&q->cx, q->g->initializer[idx], q->g->initializer[idx]->name, t))
        return NULL;
    return t;
}

static bool init_is_float(const qctx *q, int32_t idx)
{
    const Onnx__TensorProto *tp = q->g->initializer[idx];
    return tp->has_data_type && tp->data_type == CGE_F32;
}

/* ---- operator classes (which inputs QDQ wraps, as ONNX Runtime's QDQ
 * quantizer does) ------------------------------------------------------- */

typedef enum { OP_OTHER, OP_WEIGHTED, OP_GENERAL, OP_SHARED, OP_ACT } op_class;

static op_class classify(const Onnx__NodeProto *np)
{
    static const char *const weighted[] = {"Conv", "ConvTranspose", "Gemm", "MatMul"};
    /* Every float input and the output get their own range. */
    static const char *const general[] = {"Add", "Mul", "Concat", "GlobalAveragePool",
                                          "Sigmoid", "LeakyRelu", "HardSigmoid", "HardSwish"};
    /* Data movement and max/average: the output keeps the input's scale and
     * zero point, which lets a runtime drop the pair around it. */
    static const char *const shared[] = {"MaxPool", "AveragePool", "Reshape", "Flatten",
                                         "Transpose", "Squeeze", "Unsqueeze"};
    if (!is_default_domain(np->domain) || !np->op_type)
        return OP_OTHER;
    for (size_t i = 0; i < sizeof weighted / sizeof *weighted; i++)
        if (!strcmp(np->op_type, weighted[i]))
            return OP_WEIGHTED;
    for (size_t i = 0; i < sizeof general / sizeof *general; i++)
        if (!strcmp(np->op_type, general[i]))
            return OP_GENERAL;
    for (size_t i = 0; i < sizeof shared / sizeof *shared; i++)
        if (!strcmp(np->op_type, shared[i]))
            return OP_SHARED;
    if (!strcmp(np->op_type, "Relu") || !strcmp(np->op_type, "Clip"))
        return OP_ACT;
    return OP_OTHER;
}

static bool excluded(const qctx *q, const Onnx__NodeProto *np)
{
    for (int32_t i = 0; i < q->o->num_exclude; i++)
        if (np->name && q->o->exclude[i] && !strcmp(np->name, q->o->exclude[i]))
            return true;
    return false;
}

/* ---- the value table ---------------------------------------------------- */

static bool subgraph_attrs(const Onnx__NodeProto *np)
{
    for (size_t i = 0; i < np->n_attribute; i++)
        if (np->attribute[i] && (np->attribute[i]->g || np->attribute[i]->n_graphs))
            return true;
    return false;
}

static cge_status build_values(qctx *q)
{
    const Onnx__GraphProto *g = q->g;
    for (size_t i = 0; i < g->n_node; i++)
        if (g->node[i]->name && !cge__strmap_put(&q->taken, g->node[i]->name, 1))
            return oom();
    for (size_t i = 0; i < g->n_initializer; i++) {
        int32_t v = value_of(q, g->initializer[i]->name);
        if (v < 0)
            return v == -1 ? cge__onnx_io_error(&q->cx, "initializer %zu has no name", i) : oom();
        q->v[v].init = q->v[v].cinit = (int32_t)i;
    }
    for (size_t i = 0; i < g->n_input; i++) {
        int32_t v = value_of(q, g->input[i]->name);
        if (v == -2)
            return oom();
        if (v >= 0 && q->v[v].init < 0)
            q->v[v].is_input = true;
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        q->has_subgraphs |= subgraph_attrs(np);
        for (size_t j = 0; j < np->n_input; j++) {
            int32_t v = value_of(q, np->input[j]);
            if (v == -2)
                return oom();
            if (v >= 0)
                q->v[v].uses++;
        }
        for (size_t j = 0; j < np->n_output; j++) {
            int32_t v = value_of(q, np->output[j]);
            if (v == -2)
                return oom();
            if (v >= 0) {
                q->v[v].producer = (int32_t)i;
                q->v[v].producer_slot = (int32_t)j;
            }
        }
    }
    for (size_t i = 0; i < g->n_output; i++) {
        int32_t v = value_of(q, g->output[i]->name);
        if (v == -2)
            return oom();
        if (v >= 0)
            q->v[v].is_output = true;
    }
    /* Exporters route shared constants through Identity (torch: one zero
     * bias for many Convs); they are the constant as far as QDQ goes. */
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        if (is_default_domain(np->domain) && np->op_type && !strcmp(np->op_type, "Identity") &&
            np->n_input == 1 && np->n_output == 1) {
            int32_t a = cge__strmap_get(&q->vmap, np->input[0]);
            int32_t b = cge__strmap_get(&q->vmap, np->output[0]);
            if (a >= 0 && b >= 0 && q->v[a].cinit >= 0)
                q->v[b].cinit = q->v[a].cinit;
        }
    }
    q->n = calloc(g->n_node + 1, sizeof *q->n);
    q->inits = calloc(g->n_initializer + 1, sizeof *q->inits);
    if (!q->n || !q->inits)
        return oom();
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        q->n[i].nbits = -1;
        q->n[i].in_name = calloc(np->n_input + 1, sizeof(char *));
        q->n[i].out_name = calloc(np->n_output + 1, sizeof(char *));
        if (!q->n[i].in_name || !q->n[i].out_name)
            return oom();
    }
    return CGE_OK;
}

static int32_t input_value(qctx *q, const Onnx__NodeProto *np, size_t j)
{
    return j < np->n_input ? cge__strmap_get(&q->vmap, np->input[j]) : -1;
}

static int32_t output_value(qctx *q, const Onnx__NodeProto *np, size_t j)
{
    return j < np->n_output ? cge__strmap_get(&q->vmap, np->output[j]) : -1;
}

/* ---- deciding the QDQ form --------------------------------------------- */

static void mark_act(qctx *q, int32_t v)
{
    if (v < 0 || q->v[v].cinit >= 0 || q->v[v].state != V_NONE)
        return;
    q->v[v].state = V_QDQ;
    q->v[v].range_of = v;
}

static void set_slot(qnode *qn, size_t j)
{
    if (j < 64)
        qn->qslots |= (uint64_t)1 << j;
}

/* A float scalar constant's value (Clip's min/max): an initializer, or the
 * output of a Constant node (as torch exports them). */
static bool const_scalar(qctx *q, int32_t v, float *out)
{
    if (v < 0)
        return false;
    if (q->v[v].cinit < 0) {
        int32_t p = q->v[v].producer;
        const Onnx__NodeProto *np = p >= 0 ? q->g->node[p] : NULL;
        if (!np || !is_default_domain(np->domain) || strcmp(np->op_type, "Constant"))
            return false;
        const Onnx__AttributeProto *a = attr(np, "value_float");
        if (a && a->has_f) {
            *out = a->f;
            return true;
        }
        a = attr(np, "value");
        if (!a || !a->t || !a->t->has_data_type || a->t->data_type != CGE_F32)
            return false;
        cge_tensor t = {0};
        if (cge__onnx_decode_tensor(&q->cx, a->t, "Constant", &t)) {
            cge_clear_error();
            return false;
        }
        bool ok = t.bytes == sizeof(float);
        if (ok)
            memcpy(out, t.data, sizeof(float));
        free(t.data);
        return ok;
    }
    if (!init_is_float(q, q->v[v].cinit))
        return false;
    const cge_tensor *t = init_tensor(q, q->v[v].cinit);
    if (!t) {
        cge_clear_error();
        return false;
    }
    if (t->bytes != sizeof(float))
        return false;
    memcpy(out, t->data, sizeof(float));
    return true;
}

/* Relu, or a Clip whose constant bounds hold 0: the saturation of a u8
 * range calibrated on its output does what it does (ONNX Runtime folds them
 * the same way). */
static bool foldable_act(qctx *q, const Onnx__NodeProto *np)
{
    /* a symmetric range around 0 keeps the negatives: nothing clips them */
    if (q->o->activation_type == 2)
        return false;
    if (!strcmp(np->op_type, "Relu"))
        return true;
    float lo = -INFINITY, hi = INFINITY;
    if (q->opset < 11) {
        const Onnx__AttributeProto *a = attr(np, "min"), *b = attr(np, "max");
        if (a && a->has_f)
            lo = a->f;
        if (b && b->has_f)
            hi = b->f;
    } else {
        int32_t vmin = input_value(q, np, 1), vmax = input_value(q, np, 2);
        if ((vmin >= 0 && !const_scalar(q, vmin, &lo)) || (vmax >= 0 && !const_scalar(q, vmax, &hi)))
            return false;
    }
    return lo <= 0 && hi >= 0;
}

static void decide_weighted(qctx *q, int32_t i)
{
    const Onnx__NodeProto *np = q->g->node[i];
    qnode *qn = &q->n[i];
    int32_t x = input_value(q, np, 0), w = input_value(q, np, 1), y = output_value(q, np, 0);
    if (x < 0 || y < 0 || w < 0 || q->v[x].cinit >= 0)
        return;
    bool conv = np->op_type[0] == 'C';
    if (q->v[w].cinit < 0) {
        if (conv)
            return;   /* Conv with computed weights: left in float */
        mark_act(q, w);
        set_slot(qn, 1);
    } else if (!init_is_float(q, q->v[w].cinit)) {
        return;
    }
    qn->kind = N_QUANT;
    set_slot(qn, 0);
    mark_act(q, x);
    mark_act(q, y);
}

static void decide_general(qctx *q, int32_t i)
{
    const Onnx__NodeProto *np = q->g->node[i];
    qnode *qn = &q->n[i];
    int32_t y = output_value(q, np, 0);
    if (y < 0)
        return;
    bool any = false;
    for (size_t j = 0; j < np->n_input && j < 64; j++) {
        int32_t x = input_value(q, np, j);
        if (x < 0)
            continue;
        if (q->v[x].cinit >= 0 && !init_is_float(q, q->v[x].cinit))
            continue;
        if (q->v[x].cinit < 0) {
            mark_act(q, x);
            any = true;
        }
        set_slot(qn, j);
    }
    if (!any)
        return;   /* constants only: folding's business, not quantization's */
    qn->kind = N_QUANT;
    mark_act(q, y);
}

/* The value whose range a quantized value uses (through aliases). */
static int32_t range_root(const qctx *q, int32_t v)
{
    const qval *x = &q->v[v];
    if (x->state == V_ALIAS)
        x = &q->v[x->alias_of];
    return x->range_of;
}

static void decide_act(qctx *q, int32_t i, bool second_pass)
{
    const Onnx__NodeProto *np = q->g->node[i];
    qnode *qn = &q->n[i];
    int32_t t = input_value(q, np, 0), r = output_value(q, np, 0);
    if (t < 0 || r < 0 || q->v[t].cinit >= 0 || qn->kind != N_KEEP)
        return;
    qval *tv = &q->v[t];
    if (!second_pass && tv->state == V_QDQ && tv->producer >= 0 &&
        q->n[tv->producer].kind == N_QUANT && tv->fold_to < 0 && tv->uses == 1 &&
        !tv->is_output && foldable_act(q, np)) {
        qn->kind = N_FOLDED;
        tv->range_of = r;
        tv->fold_to = r;
        q->v[r].state = V_ALIAS;
        q->v[r].alias_of = t;
        return;
    }
    if (tv->state == V_NONE)
        return;
    qn->kind = N_QUANT;
    set_slot(qn, 0);
    mark_act(q, r);
}

static void decide_shared(qctx *q, int32_t i)
{
    const Onnx__NodeProto *np = q->g->node[i];
    qnode *qn = &q->n[i];
    int32_t x = input_value(q, np, 0), y = output_value(q, np, 0);
    if (x < 0 || y < 0 || q->v[x].cinit >= 0 || q->v[x].state == V_NONE)
        return;
    if (q->v[y].state == V_ALIAS)
        return;
    qn->kind = N_QUANT;
    set_slot(qn, 0);
    q->v[y].state = V_QDQ;
    q->v[y].range_of = range_root(q, x);
}

static void decide_qdq(qctx *q)
{
    const Onnx__GraphProto *g = q->g;
    for (int32_t i = 0; i < (int32_t)g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        if (excluded(q, np))
            continue;
        switch (classify(np)) {
        case OP_WEIGHTED: decide_weighted(q, i); break;
        case OP_GENERAL: decide_general(q, i); break;
        case OP_ACT: decide_act(q, i, false); break;
        default: break;
        }
    }
    /* Data movement after the rest, so that it follows whatever its input became. */
    for (int32_t i = 0; i < (int32_t)g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        if (excluded(q, np))
            continue;
        op_class c = classify(np);
        if (c == OP_SHARED)
            decide_shared(q, i);
        else if (c == OP_ACT)
            decide_act(q, i, true);
    }
}

/* ---- quantization arithmetic -------------------------------------------- */

/* u8 with a zero point over [min(rmin,0), max(rmax,0)], so that 0 is exact. */
static void act_params(float rmin, float rmax, float *scale, uint8_t *zp)
{
    double lo = fmin(rmin, 0.0), hi = fmax(rmax, 0.0);
    double s = (hi - lo) / 255.0;
    if (!(s > 0) || !isfinite(s)) {
        *scale = 1.0f;
        *zp = 0;
        return;
    }
    *scale = (float)s;
    double z = nearbyint(-lo / *scale);
    *zp = (uint8_t)(z < 0 ? 0 : z > 255 ? 255 : z);
}

/* An activation's scale and zero point for the chosen type: uint8 as above;
 * int8 the same range shifted by 128; int8 symmetric over max|x| with zero
 * point 0 (ONNX Runtime's ActivationSymmetric, in [-127, 127]). */
static void act_params_for(const qctx *q, float rmin, float rmax, float *scale, uint8_t *zp)
{
    if (q->o->activation_type == 2) {
        double a = fmax(fabs((double)rmin), fabs((double)rmax)), s = a / 127.0;
        *scale = s > 0 && isfinite(s) ? (float)s : 1.0f;
        *zp = 0;
        return;
    }
    act_params(rmin, rmax, scale, zp);
    if (q->o->activation_type == 1)
        *zp = (uint8_t)(int8_t)((int)*zp - 128);
}

static cge_dtype act_dtype(const qctx *q)
{
    return q->o->activation_type ? CGE_I8 : CGE_U8;
}

static qweight *new_weight(qctx *q, int32_t init, int axis, int kind)
{
    if (!grow((void **)&q->w, &q->cap_w, q->nw + 1, sizeof(qweight)))
        return NULL;
    qweight *w = &q->w[q->nw++];
    memset(w, 0, sizeof *w);
    w->init = init;
    w->axis = axis;
    w->kind = kind;
    w->wscale_of = -1;
    return w;
}

static cge_status name_weight(qctx *q, qweight *w, const char *base, bool dq)
{
    w->q_name = fresh(q, base, "_quantized");
    w->s_name = fresh(q, base, "_scale");
    w->z_name = fresh(q, base, "_zero_point");
    w->dq_out = dq ? fresh(q, base, "_dequantized") : "";
    return w->q_name && w->s_name && w->z_name && w->dq_out ? CGE_OK : oom();
}

/* s8 symmetric in [-127, 127], one scale per tensor or per slice of `axis`. */
static cge_status quant_s8(qctx *q, qweight *w, const cge_tensor *t)
{
    int64_t ch = w->axis >= 0 ? t->shape.dims[w->axis] : 1, inner = 1, total = 1;
    for (int d = 0; d < t->shape.rank; d++) {
        total *= t->shape.dims[d];
        if (w->axis >= 0 && d > w->axis)
            inner *= t->shape.dims[d];
    }
    const float *x = t->data;
    int8_t *o = malloc((size_t)total + 1);
    w->scales = calloc((size_t)ch, sizeof(float));
    w->zps = calloc((size_t)ch, 1);
    if (!o || !w->scales || !w->zps) {
        free(o);
        return oom();
    }
    float *amax = w->scales;   /* amax first, then the scale */
    for (int64_t k = 0; k < total; k++) {
        int64_t c = w->axis >= 0 ? (k / inner) % ch : 0;
        float a = fabsf(x[k]);
        if (isfinite(a) && a > amax[c])
            amax[c] = a;
    }
    for (int64_t c = 0; c < ch; c++)
        w->scales[c] = amax[c] > 0 ? amax[c] / 127.0f : 1.0f;
    for (int64_t k = 0; k < total; k++) {
        int64_t c = w->axis >= 0 ? (k / inner) % ch : 0;
        double v = nearbyint(x[k] / w->scales[c]);
        o[k] = (int8_t)(v < -127 ? -127 : v > 127 ? 127 : v);
    }
    w->n_scales = ch;
    w->zp_bytes = (size_t)ch;
    w->zp_dtype = CGE_I8;
    w->q = (cge_tensor){.dtype = CGE_I8, .shape = t->shape, .data = o, .bytes = (size_t)total};
    return CGE_OK;
}

/* u8 with a zero point over the tensor's own range (constant operands of
 * Add, Mul, Concat, ...). */
static cge_status quant_u8(qctx *q, qweight *w, const cge_tensor *t)
{
    size_t n = t->bytes / sizeof(float);
    const float *x = t->data;
    float lo = 0, hi = 0;
    for (size_t k = 0; k < n; k++)
        if (isfinite(x[k])) {
            lo = fminf(lo, x[k]);
            hi = fmaxf(hi, x[k]);
        }
    uint8_t *o = malloc(n + 1);
    w->scales = malloc(sizeof(float));
    w->zps = malloc(1);
    if (!o || !w->scales || !w->zps) {
        free(o);
        return oom();
    }
    uint8_t zp;
    act_params(lo, hi, &w->scales[0], &zp);
    for (size_t k = 0; k < n; k++) {
        double v = nearbyint(x[k] / w->scales[0]) + zp;
        o[k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    *(uint8_t *)w->zps = zp;
    w->n_scales = 1;
    w->zp_bytes = 1;
    w->zp_dtype = CGE_U8;
    w->q = (cge_tensor){.dtype = CGE_U8, .shape = t->shape, .data = o, .bytes = n};
    return CGE_OK;
}

/* int32 with scale x_scale * w_scale and zero point 0, as ONNX Runtime's
 * quantizer writes biases (its Conv/Gemm QDQ fusions expect them so). */
static cge_status quant_bias(qctx *q, qweight *b, const cge_tensor *t, const qweight *w)
{
    size_t n = t->bytes / sizeof(float);
    const float *x = t->data;
    int32_t *o = malloc(n * sizeof(int32_t) + 1);
    int64_t ns = w->n_scales;
    b->scales = malloc(sizeof(float) * (size_t)ns);
    b->zps = calloc((size_t)ns, sizeof(int32_t));
    if (!o || !b->scales || !b->zps) {
        free(o);
        return oom();
    }
    for (int64_t c = 0; c < ns; c++)
        b->scales[c] = b->x_scale * w->scales[c];
    for (size_t k = 0; k < n; k++) {
        float s = b->scales[ns > 1 ? k : 0];
        double v = s > 0 ? nearbyint(x[k] / s) : 0;
        o[k] = (int32_t)(v < -2147483647.0 ? -2147483647.0 : v > 2147483647.0 ? 2147483647.0 : v);
    }
    b->axis = ns > 1 ? 0 : -1;
    b->n_scales = ns;
    b->zp_bytes = (size_t)ns * sizeof(int32_t);
    b->zp_dtype = CGE_I32;
    b->q = (cge_tensor){.dtype = CGE_I32, .shape = t->shape, .data = o, .bytes = n * 4};
    return CGE_OK;
}

/* The weight record for initializer value `v` quantized as `kind` along
 * `axis`, made once and shared by every node that reads it so. */
static cge_status weight_for(qctx *q, int32_t v, int axis, int kind, int32_t *out)
{
    for (int32_t k = 0; k < q->nw; k++)
        if (q->w[k].init == q->v[v].cinit && q->w[k].axis == axis && q->w[k].kind == kind) {
            *out = k;
            return CGE_OK;
        }
    const cge_tensor *t = init_tensor(q, q->v[v].cinit);
    if (!t)
        return cge_error(cge_last_error_layer(), cge_last_error_status(), "%s", cge_last_error());
    qweight *w = new_weight(q, q->v[v].cinit, axis, kind);
    if (!w)
        return oom();
    cge_status st = kind == 0 ? quant_s8(q, w, t) : quant_u8(q, w, t);
    if (!st)
        st = name_weight(q, w, q->g->initializer[q->v[v].cinit]->name, true);
    *out = (int32_t)(w - q->w);
    return st;
}

/* The output-channel axis of a weighted node's weight for per-channel
 * scales, or -1 (per tensor). */
static int weight_axis(const qctx *q, const Onnx__NodeProto *np, const cge_tensor *w)
{
    if (!q->o->per_channel || w->shape.rank < 1)
        return -1;
    if (!strcmp(np->op_type, "Conv"))
        return 0;
    if (!strcmp(np->op_type, "ConvTranspose"))
        return attr_int(np, "group", 1) == 1 && w->shape.rank >= 2 ? 1 : -1;
    if (w->shape.rank != 2)
        return -1;
    if (!strcmp(np->op_type, "Gemm"))
        return attr_int(np, "transB", 0) ? 0 : 1;
    return 1;   /* MatMul [K, N] */
}

static void use_weight(qctx *q, int32_t node, size_t slot, int32_t v, const qweight *w)
{
    q->n[node].in_name[slot] = w->dq_out;
    q->v[v].renamed_uses++;
}

static cge_status apply_weighted(qctx *q, int32_t i)
{
    const Onnx__NodeProto *np = q->g->node[i];
    int32_t x = input_value(q, np, 0), wv = input_value(q, np, 1);
    if (q->v[x].state == V_NONE) {
        q->n[i].kind = N_KEEP;   /* its input is not float32 after all */
        return CGE_OK;
    }
    if (q->v[wv].cinit < 0)
        return CGE_OK;           /* MatMul of two activations */
    const cge_tensor *t = init_tensor(q, q->v[wv].cinit);
    if (!t)
        return cge_error(cge_last_error_layer(), cge_last_error_status(), "%s", cge_last_error());
    int32_t wk;
    cge_status st = weight_for(q, wv, weight_axis(q, np, t), 0, &wk);
    if (st)
        return st;
    use_weight(q, i, 1, wv, &q->w[wk]);
    q->rep->weights++;
    int32_t bv = input_value(q, np, 2);
    bool gemm = !strcmp(np->op_type, "Gemm");
    if (bv < 0 || q->v[bv].cinit < 0 || !init_is_float(q, q->v[bv].cinit) || np->op_type[0] == 'M')
        return CGE_OK;
    const Onnx__AttributeProto *beta = gemm ? attr(np, "beta") : NULL;
    if (beta && beta->has_f && beta->f != 1.0f)
        return CGE_OK;           /* a scaled bias stays float */
    const cge_tensor *bt = init_tensor(q, q->v[bv].cinit);
    if (!bt)
        return cge_error(cge_last_error_layer(), cge_last_error_status(), "%s", cge_last_error());
    int64_t nb = (int64_t)(bt->bytes / sizeof(float));
    if (bt->shape.rank != 1 || (q->w[wk].n_scales > 1 && nb != q->w[wk].n_scales))
        return CGE_OK;
    qweight *b = new_weight(q, q->v[bv].cinit, -1, 2);
    if (!b)
        return oom();
    b->x_scale = q->v[x].state == V_ALIAS ? q->v[q->v[x].alias_of].scale : q->v[x].scale;
    b->wscale_of = wk;
    if ((st = quant_bias(q, b, bt, &q->w[wk])) ||
        (st = name_weight(q, b, q->g->initializer[q->v[bv].cinit]->name, true)))
        return st;
    use_weight(q, i, 2, bv, b);
    q->rep->weights++;
    return CGE_OK;
}

static cge_status apply_general(qctx *q, int32_t i)
{
    const Onnx__NodeProto *np = q->g->node[i];
    bool any = false;
    for (size_t j = 0; j < np->n_input && j < 64; j++) {
        int32_t x = input_value(q, np, j);
        if (x >= 0 && (q->n[i].qslots >> j & 1) && q->v[x].cinit < 0 && q->v[x].state != V_NONE)
            any = true;
    }
    if (!any) {
        q->n[i].kind = N_KEEP;
        return CGE_OK;
    }
    for (size_t j = 0; j < np->n_input && j < 64; j++) {
        int32_t x = input_value(q, np, j);
        if (x < 0 || !(q->n[i].qslots >> j & 1) || q->v[x].cinit < 0)
            continue;
        int32_t wk;
        cge_status st = weight_for(q, x, -1, 1, &wk);
        if (st)
            return st;
        use_weight(q, i, j, x, &q->w[wk]);
        q->rep->weights++;
    }
    return CGE_OK;
}

/* After calibration: ranges become scales, values without a float range
 * drop out (and the nodes that needed them), weights are quantized, names
 * are given. */
static cge_status apply_qdq(qctx *q, const cge__qrange *ranges, const int32_t *range_idx)
{
    for (int32_t v = 0; v < q->nv; v++) {
        qval *x = &q->v[v];
        if (x->state != V_QDQ)
            continue;
        const cge__qrange *r = &ranges[range_idx[x->range_of]];
        if (!r->found) {
            x->state = V_NONE;
            if (x->fold_to >= 0) {
                q->v[x->fold_to].state = V_NONE;
                q->n[q->v[x->fold_to].producer].kind = N_KEEP;
                x->fold_to = -1;
            }
            continue;
        }
        act_params_for(q, r->rmin, r->rmax, &x->scale, &x->zp);
    }
    for (int32_t i = 0; i < (int32_t)q->g->n_node; i++) {
        qnode *qn = &q->n[i];
        if (qn->kind != N_QUANT)
            continue;
        op_class c = classify(q->g->node[i]);
        cge_status st = CGE_OK;
        if (c == OP_WEIGHTED)
            st = apply_weighted(q, i);
        else if (c == OP_GENERAL)
            st = apply_general(q, i);
        else if (q->v[input_value(q, q->g->node[i], 0)].state == V_NONE)
            qn->kind = N_KEEP;
        if (st)
            return st;
    }
    /* Names: a produced value keeps its name on the DequantizeLinear (its
     * readers stay as they are) and its producer writes a new one; a graph
     * input keeps its name and the quantized nodes read a new one. */
    for (int32_t v = 0; v < q->nv; v++) {
        qval *x = &q->v[v];
        if (x->state != V_QDQ)
            continue;
        q->rep->activations++;
        if (x->fold_to >= 0) {
            x->q_src = x->name;
            x->dq_name = q->v[x->fold_to].name;
            q->rep->relu_folded++;
        } else if (x->producer >= 0) {
            x->q_src = fresh(q, x->name, "_prequant");
            x->dq_name = x->name;
            q->n[x->producer].out_name[x->producer_slot] = x->q_src;
        } else {
            x->q_src = x->name;
            x->dq_name = fresh(q, x->name, "_dequantized");
        }
        if (!x->q_src || !x->dq_name)
            return oom();
    }
    for (int32_t i = 0; i < (int32_t)q->g->n_node; i++) {
        const Onnx__NodeProto *np = q->g->node[i];
        qnode *qn = &q->n[i];
        if (qn->kind != N_QUANT)
            continue;
        q->rep->nodes_quantized++;
        for (size_t j = 0; j < np->n_input && j < 64; j++) {
            int32_t x = input_value(q, np, j);
            if (x >= 0 && (qn->qslots >> j & 1) && q->v[x].is_input && q->v[x].state == V_QDQ)
                qn->in_name[j] = q->v[x].dq_name;
        }
    }
    return CGE_OK;
}

/* ---- weight-only: MatMulNBits ------------------------------------------- */

/* Column n's block of K rows k0 .. k0 + len of the [K, N] float weights x:
 * asymmetric over [min(w, 0), max(w, 0)] in `levels` steps; writes the
 * scale and returns the zero point. */
static int block_params(const float *x, int64_t N, int64_t n, int64_t k0, int64_t len,
                        int levels, float *scale)
{
    float lo = 0, hi = 0;
    for (int64_t k = 0; k < len; k++) {
        float v = x[(k0 + k) * N + n];
        if (isfinite(v)) {
            lo = fminf(lo, v);
            hi = fmaxf(hi, v);
        }
    }
    float s = (hi - lo) / levels;
    if (!(s > 0))
        s = 1.0f;
    *scale = s;
    double zd = nearbyint(-lo / s);
    return zd < 0 ? 0 : zd > levels ? levels : (int)zd;
}

/* ONNX Runtime's layout: B uint8 [N, blocks, block_size * bits / 8] with
 * each column's K values in blocks, codes packed low bits first; scales
 * float [N * blocks]; zero points uint8, per column ceil(blocks * bits / 8)
 * bytes (two 4-bit ones per byte, low first). Asymmetric per block:
 * w = (code - zp) * scale over [min(w, 0), max(w, 0)]. */
static cge_status pack_nbits(qctx *q, qweight *w, const cge_tensor *t, int bits, int64_t bs)
{
    int64_t K = t->shape.dims[0], N = t->shape.dims[1];
    int64_t blocks = (K + bs - 1) / bs, blob = bs * bits / 8;
    int64_t zp_col = (blocks * bits + 7) / 8;
    const float *x = t->data;
    uint8_t *b = calloc((size_t)(N * blocks * blob), 1);
    w->scales = malloc(sizeof(float) * (size_t)(N * blocks));
    w->zps = calloc((size_t)(N * zp_col), 1);
    if (!b || !w->scales || !w->zps) {
        free(b);
        return oom();
    }
    const int levels = (1 << bits) - 1;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k0 = 0, blk = 0; k0 < K; k0 += bs, blk++) {
            int64_t len = K - k0 < bs ? K - k0 : bs;
            float s;
            int zp = block_params(x, N, n, k0, len, levels, &s);
            w->scales[n * blocks + blk] = s;
            uint8_t *zrow = (uint8_t *)w->zps + n * zp_col;
            if (bits == 8)
                zrow[blk] = (uint8_t)zp;
            else
                zrow[blk / 2] |= (uint8_t)(zp << (4 * (blk & 1)));
            uint8_t *dst = b + (n * blocks + blk) * blob;
            for (int64_t k = 0; k < bs; k++) {
                /* past K: the zero point, i.e. weight 0 */
                int c = zp;
                if (k < len) {
                    double v = nearbyint(x[(k0 + k) * N + n] / s) + zp;
                    c = v < 0 ? 0 : v > levels ? levels : (int)v;
                }
                if (bits == 8)
                    dst[k] = (uint8_t)c;
                else
                    dst[k / 2] |= (uint8_t)(c << (4 * (k & 1)));
            }
        }
    w->n_scales = N * blocks;
    w->zp_bytes = (size_t)(N * zp_col);
    w->zp_dtype = CGE_U8;
    w->q = (cge_tensor){.dtype = CGE_U8, .data = b, .bytes = (size_t)(N * blocks * blob)};
    w->dims_q[0] = N;
    w->dims_q[1] = blocks;
    w->dims_q[2] = blob;
    w->rank_q = 3;
    return CGE_OK;
}

/* The same codes as pack_nbits (asymmetric per block of K, per column), kept
 * in the weight's own [K, N] layout for DequantizeLinear 21 with
 * block_size: W uint4 (two codes a byte, low nibble first, ONNX's packing)
 * or uint8, scales float and zero points uint4 / uint8 [blocks, N]. */
static cge_status pack_blocked_dq(qweight *w, const cge_tensor *t, int bits, int64_t bs)
{
    int64_t K = t->shape.dims[0], N = t->shape.dims[1], blocks = (K + bs - 1) / bs;
    size_t nq = bits == 4 ? (size_t)(K * N + 1) / 2 : (size_t)(K * N);
    size_t nz = bits == 4 ? (size_t)(blocks * N + 1) / 2 : (size_t)(blocks * N);
    const float *x = t->data;
    uint8_t *b = calloc(nq + 1, 1);
    w->scales = malloc(sizeof(float) * (size_t)(N * blocks));
    w->zps = calloc(nz + 1, 1);
    if (!b || !w->scales || !w->zps) {
        free(b);
        return oom();
    }
    const int levels = (1 << bits) - 1;
    uint8_t *zp_out = w->zps;
    for (int64_t blk = 0; blk < blocks; blk++)
        for (int64_t n = 0; n < N; n++) {
            int64_t k0 = blk * bs, len = K - k0 < bs ? K - k0 : bs, p = blk * N + n;
            float s;
            int zp = block_params(x, N, n, k0, len, levels, &s);
            w->scales[p] = s;
            if (bits == 8)
                zp_out[p] = (uint8_t)zp;
            else
                zp_out[p / 2] |= (uint8_t)(zp << (4 * (p & 1)));
            for (int64_t k = 0; k < len; k++) {
                int64_t i = (k0 + k) * N + n;
                double v = nearbyint(x[i] / s) + zp;
                int c = v < 0 ? 0 : v > levels ? levels : (int)v;
                if (bits == 8)
                    b[i] = (uint8_t)c;
                else
                    b[i / 2] |= (uint8_t)(c << (4 * (i & 1)));
            }
        }
    w->n_scales = N * blocks;
    w->zp_bytes = nz;
    /* cge's dtype numbers are ONNX's; 21 (UINT4) has no cge dtype, the
     * writer only passes the number on */
    w->zp_dtype = bits == 4 ? (cge_dtype)21 : CGE_U8;
    w->q = (cge_tensor){.dtype = w->zp_dtype, .data = b, .bytes = nq};
    w->dims_q[0] = K;
    w->dims_q[1] = N;
    w->rank_q = 2;
    w->axis = 0;
    w->block = bs;
    return CGE_OK;
}

static cge_status decide_nbits(qctx *q)
{
    int bits = q->o->weights_only_bits;
    int64_t bs = q->o->block_size ? q->o->block_size : 32;
    if (q->o->weights_only_format != 0 && q->o->weights_only_format != 1)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "quantize: weights_only_format is 0 (MatMulNBits) or 1 "
                         "(DequantizeLinear), not %d", (int)q->o->weights_only_format);
    if (bits != 4 && bits != 8)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "quantize: --weights-only takes int8 or int4 (bits 8 or 4), not %d", bits);
    if (bs < 16 || (bs & (bs - 1)))
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "quantize: block size %lld is not a power of two >= 16", (long long)bs);
    int matmuls = 0;
    for (int32_t i = 0; i < (int32_t)q->g->n_node; i++) {
        const Onnx__NodeProto *np = q->g->node[i];
        if (!is_default_domain(np->domain) || strcmp(np->op_type, "MatMul") || excluded(q, np))
            continue;
        matmuls++;
        int32_t a = input_value(q, np, 0), bv = input_value(q, np, 1);
        if (a < 0 || bv < 0 || q->v[bv].cinit < 0 || !init_is_float(q, q->v[bv].cinit) ||
            output_value(q, np, 0) < 0)
            continue;
        const cge_tensor *t = init_tensor(q, q->v[bv].cinit);
        if (!t)
            return cge_error(cge_last_error_layer(), cge_last_error_status(), "%s",
                             cge_last_error());
        if (t->shape.rank != 2)
            continue;
        int32_t wk = -1;
        for (int32_t k = 0; k < q->nw; k++)
            if (q->w[k].init == q->v[bv].cinit)
                wk = k;
        if (wk < 0) {
            bool dq = q->o->weights_only_format == 1;
            qweight *w = new_weight(q, q->v[bv].cinit, -1, dq ? 4 : 3);
            if (!w)
                return oom();
            cge_status st = dq ? pack_blocked_dq(w, t, bits, bs) : pack_nbits(q, w, t, bits, bs);
            if (!st)
                st = name_weight(q, w, q->g->initializer[q->v[bv].cinit]->name, dq);
            if (st)
                return st;
            wk = q->nw - 1;
            q->rep->weights++;
        }
        if (q->o->weights_only_format == 1) {
            q->n[i].kind = N_QUANT;
            use_weight(q, i, 1, bv, &q->w[wk]);
        } else {
            q->n[i].kind = N_NBITS;
            q->n[i].nbits = wk;
            q->v[bv].renamed_uses++;
        }
        q->rep->nodes_quantized++;
    }
    if (!q->rep->nodes_quantized)
        return cge__onnx_unsupported(&q->cx, "--weights-only int%d rewrites MatMuls whose weight "
                                            "is a constant 2-D float tensor; the model has %d "
                                            "MatMul%s and none of them qualifies", bits, matmuls,
                                     matmuls == 1 ? "" : "s");
    return CGE_OK;
}

/* ---- opsets ------------------------------------------------------------- */

/* Operators whose definition changed incompatibly (an attribute became an
 * input, an axis means something else) at the version given: a model using
 * one cannot simply import a newer opset past it. */
static const struct {
    const char *op;
    int64_t version;
} opset_breaks[] = {
    {"Slice", 10},   {"TopK", 10},      {"Upsample", 10},  {"Clip", 11},   {"Pad", 11},
    {"Resize", 11},  {"Scatter", 11},   {"Dropout", 12},   {"Squeeze", 13}, {"Unsqueeze", 13},
    {"Split", 13},   {"ReduceSum", 13}, {"Softmax", 13},   {"LogSoftmax", 13}, {"Hardmax", 13},
    /* 18 moved the other reductions' axes to an input; 20 and 21 changed
     * these (what an opset-21 weight-only output must not cross) */
    {"ReduceMean", 18}, {"ReduceMax", 18}, {"ReduceMin", 18}, {"ReduceProd", 18},
    {"ReduceL1", 18},   {"ReduceL2", 18},  {"ReduceLogSum", 18}, {"ReduceLogSumExp", 18},
    {"ReduceSumSquare", 18}, {"GridSample", 20}, {"DFT", 20}, {"GroupNormalization", 21},
};

/* A reduction whose axes attribute 18 moved to an input. */
static bool reduce18(const Onnx__NodeProto *np)
{
    if (!is_default_domain(np->domain) || !np->op_type || strncmp(np->op_type, "Reduce", 6) ||
        !strcmp(np->op_type, "ReduceSum"))
        return false;
    for (size_t k = 0; k < sizeof opset_breaks / sizeof *opset_breaks; k++)
        if (!strcmp(np->op_type, opset_breaks[k].op))
            return opset_breaks[k].version == 18;
    return false;
}

/* The first operator of g (nested graphs included) whose definition broke
 * between opsets from and to; with upgrade18, the main graph's reductions
 * (which write_reduce18 rewrites) do not count. */
static const char *breaking_op_ex(const Onnx__GraphProto *g, int64_t from, int64_t to, int depth,
                                  bool upgrade18)
{
    if (!g || depth > CGE_ONNX_MAX_DEPTH)
        return NULL;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        if (is_default_domain(np->domain) && np->op_type && !(upgrade18 && depth == 0 &&
                                                              reduce18(np)))
            for (size_t k = 0; k < sizeof opset_breaks / sizeof *opset_breaks; k++)
                if (!strcmp(np->op_type, opset_breaks[k].op) && opset_breaks[k].version > from &&
                    opset_breaks[k].version <= to)
                    return np->op_type;
        for (size_t a = 0; a < np->n_attribute; a++) {
            const Onnx__AttributeProto *ap = np->attribute[a];
            const char *r = breaking_op_ex(ap->g, from, to, depth + 1, upgrade18);
            for (size_t k = 0; !r && k < ap->n_graphs; k++)
                r = breaking_op_ex(ap->graphs[k], from, to, depth + 1, upgrade18);
            if (r)
                return r;
        }
    }
    return NULL;
}

static const char *breaking_op(const Onnx__GraphProto *g, int64_t from, int64_t to, int depth)
{
    return breaking_op_ex(g, from, to, depth, false);
}

/* QDQ needs opset 10 (per-channel axes: 13); the output imports 13 where the
 * model's operators allow it. */
static cge_status choose_opset(qctx *q)
{
    q->opset_out = q->opset;
    if (q->o->weights_only_bits && q->o->weights_only_format == 1) {
        /* DequantizeLinear's block_size and uint4 are opset 21's */
        /* the main graph's reductions are rewritten to 18's form (write_reduce18) */
        const char *bad = q->opset < 21 ? breaking_op_ex(q->g, q->opset, 21, 0, true) : NULL;
        if (bad)
            return cge__onnx_unsupported(&q->cx, "the DequantizeLinear weight-only form needs "
                                                "opset 21; the model imports opset %lld and uses "
                                                "%s, which changed since: write the MatMulNBits "
                                                "form instead", (long long)q->opset, bad);
        if (q->opset < 21)
            q->opset_out = 21;
        q->upgrade_reduce = q->opset < 18;
        return CGE_OK;
    }
    if (q->o->weights_only_bits || q->opset >= 13)
        return CGE_OK;
    const char *bad = breaking_op(q->g, q->opset, 13, 0);
    if (!bad) {
        q->opset_out = 13;
        if (q->opset < 10)
            snprintf(q->rep->warning, sizeof q->rep->warning,
                     "the model imports opset %lld, older than QuantizeLinear (10): raised to 13; "
                     "check the result", (long long)q->opset);
        return CGE_OK;
    }
    if (q->o->per_channel)
        return cge__onnx_unsupported(&q->cx, "per-channel quantization needs opset 13; the model "
                                            "imports opset %lld and uses %s, which changed "
                                            "since: export it at opset 13 or quantize per tensor",
                                     (long long)q->opset, bad);
    if (q->opset < 10)
        return cge__onnx_unsupported(&q->cx, "QuantizeLinear needs opset 10; the model imports "
                                            "opset %lld and uses %s, which changed since: export "
                                            "it at opset 13", (long long)q->opset, bad);
    return CGE_OK;
}

/* ---- calibration samples against the model's inputs --------------------- */

static cge_status check_samples(qctx *q)
{
    const cge_quantize_options *o = q->o;
    if (!o->samples || o->num_samples < 1 || o->inputs_per_sample < 1)
        return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG,
                         "quantize: %s: calibration data is needed (one sample or more, each "
                         "naming every input of the model)", q->label);
    char shp[2][128];
    for (size_t i = 0; i < q->g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = q->g->input[i];
        int32_t v = cge__strmap_get(&q->vmap, vi->name);
        if (v < 0 || !q->v[v].is_input)
            continue;
        for (int32_t k = 0; k < o->num_samples; k++) {
            const cge_tensor *t = cge__quant_sample(o, k, vi->name);
            if (!t)
                return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG,
                                 "quantize: calibration sample %d has no tensor for input '%s'",
                                 (int)k, vi->name);
            if (!t->data || cge_tensor_nbytes(t->dtype, &t->shape) != t->bytes)
                return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG,
                                 "quantize: calibration sample %d, input '%s': %zu bytes for "
                                 "shape %s", (int)k, vi->name, t->bytes,
                                 cge_shape_str(&t->shape, shp[0], sizeof shp[0]));
            const Onnx__TypeProto__Tensor *tt =
                vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE
                    ? vi->type->tensor_type : NULL;
            if (tt && tt->has_elem_type && tt->elem_type != (int32_t)t->dtype)
                return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG,
                                 "quantize: calibration sample %d, input '%s' is %s; the model "
                                 "declares element type %d", (int)k, vi->name,
                                 cge_dtype_name(t->dtype), (int)tt->elem_type);
            const Onnx__TensorShapeProto *sp = tt ? tt->shape : NULL;
            bool bad = sp && (int32_t)sp->n_dim != t->shape.rank;
            for (size_t d = 0; sp && !bad && d < sp->n_dim; d++)
                bad = sp->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                      sp->dim[d]->dim_value != t->shape.dims[d];
            const cge_tensor *t0 = cge__quant_sample(o, 0, vi->name);
            if (bad || (k && (t0->dtype != t->dtype || !cge_shape_equal(&t0->shape, &t->shape)))) {
                char want[128] = "";
                size_t used = 0;
                for (size_t d = 0; sp && d < sp->n_dim && used < sizeof want - 24; d++) {
                    const Onnx__TensorShapeProto__Dimension *dm = sp->dim[d];
                    if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
                        used += snprintf(want + used, sizeof want - used, "%s%lld", d ? "," : "[",
                                         (long long)dm->dim_value);
                    else
                        used += snprintf(want + used, sizeof want - used, "%s?", d ? "," : "[");
                }
                if (bad)
                    return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG,
                                     "quantize: calibration sample %d, input '%s' has shape %s; "
                                     "the model declares %s]", (int)k, vi->name,
                                     cge_shape_str(&t->shape, shp[0], sizeof shp[0]),
                                     want[0] ? want : "[");
                return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG,
                                 "quantize: calibration sample %d, input '%s' has shape %s; "
                                 "sample 0's is %s (all samples must agree)", (int)k, vi->name,
                                 cge_shape_str(&t->shape, shp[0], sizeof shp[0]),
                                 cge_shape_str(&t0->shape, shp[1], sizeof shp[1]));
            }
        }
    }
    for (int32_t i = 0; i < o->inputs_per_sample; i++) {
        const char *nm = o->samples[i].name;
        int32_t v = nm ? cge__strmap_get(&q->vmap, nm) : -1;
        if (v < 0 || !q->v[v].is_input)
            return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG,
                             "quantize: calibration data names '%s', which is not an input of "
                             "the model", nm ? nm : "(null)");
    }
    return CGE_OK;
}

/* ---- writing ------------------------------------------------------------ */

static const int64_t no_dims[1] = {0};

/* A weight's integer initializer, scale and zero point, and (QDQ) its
 * DequantizeLinear. */
static void write_weight(qctx *q, const qweight *w, cge__pbw *nodes, cge__pbw *inits)
{
    const Onnx__TensorProto *tp = q->g->initializer[w->init];
    if (w->rank_q)
        cge__onnx_write_tensor(inits, 5, w->q_name, w->q.dtype, w->dims_q, w->rank_q, w->q.data,
                               w->q.bytes);
    else
        cge__onnx_write_tensor(inits, 5, w->q_name, w->q.dtype, tp->dims, (int)tp->n_dims,
                               w->q.data, w->q.bytes);
    if (w->kind == 4) {
        /* blocked: scales and zero points [blocks, N] */
        int64_t pd[2] = {(w->dims_q[0] + w->block - 1) / w->block, w->dims_q[1]};
        cge__onnx_write_tensor(inits, 5, w->s_name, CGE_F32, pd, 2, w->scales,
                               sizeof(float) * (size_t)w->n_scales);
        cge__onnx_write_tensor(inits, 5, w->z_name, w->zp_dtype, pd, 2, w->zps, w->zp_bytes);
        const char *in[3] = {w->q_name, w->s_name, w->z_name};
        cge__onnx_attr_w at[2] = {{.name = "axis", .kind = CGE_ATTR_INT, .i = 0},
                                  {.name = "block_size", .kind = CGE_ATTR_INT, .i = w->block}};
        cge__onnx_write_node(nodes, 1, fresh(q, w->dq_out, "_DequantizeLinear"),
                             "DequantizeLinear", "", in, 3, &w->dq_out, 1, at, 2);
        return;
    }
    bool vec = w->axis >= 0 || w->kind == 3;
    int64_t ns = w->n_scales, nz = (int64_t)w->zp_bytes;
    cge__onnx_write_tensor(inits, 5, w->s_name, CGE_F32, vec ? &ns : no_dims, vec ? 1 : 0,
                           w->scales, sizeof(float) * (size_t)w->n_scales);
    if (w->kind == 3) {
        cge__onnx_write_tensor(inits, 5, w->z_name, CGE_U8, &nz, 1, w->zps, w->zp_bytes);
        return;
    }
    int64_t nzd = w->n_scales;
    cge__onnx_write_tensor(inits, 5, w->z_name, w->zp_dtype, vec ? &nzd : no_dims, vec ? 1 : 0,
                           w->zps, w->zp_bytes);
    const char *in[3] = {w->q_name, w->s_name, w->z_name};
    cge__onnx_attr_w ax = {.name = "axis", .kind = CGE_ATTR_INT, .i = w->axis};
    cge__onnx_write_node(nodes, 1, fresh(q, w->dq_out, "_DequantizeLinear"), "DequantizeLinear",
                         "", in, 3, &w->dq_out, 1, &ax, w->axis >= 0 ? 1 : 0);
}

/* QuantizeLinear -> DequantizeLinear for an activation. */
static void write_pair(qctx *q, const qval *x, cge__pbw *nodes, cge__pbw *inits)
{
    const char *s = fresh(q, x->name, "_scale"), *z = fresh(q, x->name, "_zero_point");
    const char *qo = fresh(q, x->name, "_quantized");
    if (!s || !z || !qo) {
        nodes->oom = true;
        return;
    }
    cge__onnx_write_tensor(inits, 5, s, CGE_F32, no_dims, 0, &x->scale, sizeof(float));
    cge__onnx_write_tensor(inits, 5, z, act_dtype(q), no_dims, 0, &x->zp, 1);
    const char *qin[3] = {x->q_src, s, z}, *dqin[3] = {qo, s, z};
    cge__onnx_write_node(nodes, 1, fresh(q, x->name, "_QuantizeLinear"), "QuantizeLinear", "", qin,
                         3, &qo, 1, NULL, 0);
    cge__onnx_write_node(nodes, 1, fresh(q, x->name, "_DequantizeLinear"), "DequantizeLinear", "",
                         dqin, 3, &x->dq_name, 1, NULL, 0);
}

/* A node with some inputs/outputs renamed: every other field as it was. */
static bool write_renamed_node(const qnode *qn, const cge__pb_field *nf, cge__pbw *out)
{
    cge__pbw sub = {0};
    size_t pos = 0;
    int ni = 0, no = 0;
    cge__pb_field f;
    bool bad = false;
    while (cge__pb_next(nf->payload, nf->payload_len, &pos, &f, &bad)) {
        const char *nm = NULL;
        if (f.number == 1 && f.wire == 2)
            nm = qn->in_name[ni++];
        else if (f.number == 2 && f.wire == 2)
            nm = qn->out_name[no++];
        if (nm)
            cge__pbw_string(&sub, f.number, nm);
        else
            cge__pbw_raw(&sub, f.start, (size_t)(f.end - f.start));
    }
    cge__pbw_message(out, 1, &sub);
    cge__pbw_free(&sub);
    return !bad;
}

static bool node_renamed(const qnode *qn, const Onnx__NodeProto *np)
{
    for (size_t j = 0; j < np->n_input; j++)
        if (qn->in_name[j])
            return true;
    for (size_t j = 0; j < np->n_output; j++)
        if (qn->out_name[j])
            return true;
    return false;
}

static void write_nbits_node(qctx *q, int32_t i, cge__pbw *nodes)
{
    const Onnx__NodeProto *np = q->g->node[i];
    const qweight *w = &q->w[q->n[i].nbits];
    const char *in[4] = {np->input[0], w->q_name, w->s_name, w->z_name};
    const char *out = np->output[0];
    cge__onnx_attr_w a[4] = {
        {.name = "K", .kind = CGE_ATTR_INT, .i = q->inits[w->init].shape.dims[0]},
        {.name = "N", .kind = CGE_ATTR_INT, .i = w->dims_q[0]},
        {.name = "bits", .kind = CGE_ATTR_INT, .i = q->o->weights_only_bits},
        {.name = "block_size", .kind = CGE_ATTR_INT,
         .i = q->o->block_size ? q->o->block_size : 32}};
    const char *name = np->name && np->name[0] ? np->name : fresh(q, out, "_MatMulNBits");
    cge__onnx_write_node(nodes, 1, name, "MatMulNBits", "com.microsoft", in, 4, &out, 1, a, 4);
}

/* A reduction of opset < 18 in 18's form: its axes attribute becomes a
 * constant int64 input; keepdims stays. */
static void write_reduce18(qctx *q, const Onnx__NodeProto *np, cge__pbw *nodes, cge__pbw *inits)
{
    const Onnx__AttributeProto *axes = NULL, *keep = NULL;
    for (size_t a = 0; a < np->n_attribute; a++) {
        const Onnx__AttributeProto *ap = np->attribute[a];
        if (ap && ap->name && !strcmp(ap->name, "axes"))
            axes = ap;
        else if (ap && ap->name && !strcmp(ap->name, "keepdims"))
            keep = ap;
    }
    const char *out = np->n_output ? np->output[0] : "";
    const char *in[2] = {np->n_input ? np->input[0] : "", NULL};
    int n_in = 1;
    if (axes && axes->n_ints) {
        const char *an = fresh(q, out, "_axes");
        if (!an) {
            nodes->oom = true;
            return;
        }
        int64_t n = (int64_t)axes->n_ints;
        cge__onnx_write_tensor(inits, 5, an, CGE_I64, &n, 1, axes->ints,
                               sizeof(int64_t) * axes->n_ints);
        in[n_in++] = an;
    }
    cge__onnx_attr_w kd = {.name = "keepdims", .kind = CGE_ATTR_INT, .i = keep ? keep->i : 1};
    const char *name = np->name && np->name[0] ? np->name : fresh(q, out, np->op_type);
    cge__onnx_write_node(nodes, 1, name, np->op_type, "", in, n_in,
                         (const char *const *)np->output, (int)np->n_output, &kd, 1);
}

static bool init_removed(const qctx *q, int32_t idx)
{
    int32_t v = cge__strmap_get(&q->vmap, q->g->initializer[idx]->name);
    const qval *x = &q->v[v];
    /* Still read in float somewhere (or maybe from a nested graph): kept. */
    return x->renamed_uses > 0 && x->renamed_uses == x->uses && !x->is_output &&
           !x->is_input && !q->has_subgraphs;
}

static cge_status write_graph(qctx *q, const Onnx__ModelProto *m, const uint8_t *gdata,
                              size_t gsize, cge__pbw *out)
{
    cge__pbw nodes = {0}, inits = {0};
    size_t pos = 0;
    int32_t node_k = 0, init_k = 0, input_k = 0;
    bool bad = false, started = false;
    cge__pb_field f;
    (void)m;
    while (cge__pb_next(gdata, gsize, &pos, &f, &bad)) {
        if (f.number == 1 && f.wire == 2) {
            if (!started) {
                /* Weights and graph inputs first: they depend on nothing. */
                started = true;
                for (int32_t k = 0; k < q->nw; k++)
                    write_weight(q, &q->w[k], &nodes, &inits);
                for (int32_t v = 0; v < q->nv; v++)
                    if (q->v[v].state == V_QDQ && q->v[v].producer < 0)
                        write_pair(q, &q->v[v], &nodes, &inits);
            }
            if (node_k >= (int32_t)q->g->n_node) {
                bad = true;
                break;
            }
            const qnode *qn = &q->n[node_k];
            const Onnx__NodeProto *np = q->g->node[node_k];
            if (qn->kind == N_NBITS)
                write_nbits_node(q, node_k, &nodes);
            else if (qn->kind == N_FOLDED)
                ;   /* its clipping is the saturation of the pair before it */
            else if (q->upgrade_reduce && reduce18(np))
                write_reduce18(q, np, &nodes, &inits);
            else if (node_renamed(qn, np))
                bad |= !write_renamed_node(qn, &f, &nodes);
            else
                cge__pbw_raw(&nodes, f.start, (size_t)(f.end - f.start));
            for (size_t j = 0; j < np->n_output; j++) {
                int32_t v = output_value(q, np, j);
                if (v >= 0 && q->v[v].state == V_QDQ && q->v[v].producer == node_k)
                    write_pair(q, &q->v[v], &nodes, &inits);
            }
            node_k++;
            continue;
        }
        if (f.number == 5 && f.wire == 2) {
            if (init_k < (int32_t)q->g->n_initializer && !init_removed(q, init_k))
                cge__pbw_raw(&inits, f.start, (size_t)(f.end - f.start));
            init_k++;
            continue;
        }
        if (f.number == 11 && f.wire == 2) {
            /* An input that names a removed initializer (IR < 4 lists them) goes too. */
            const char *nm = input_k < (int32_t)q->g->n_input ? q->g->input[input_k]->name : NULL;
            int32_t v = nm ? cge__strmap_get(&q->vmap, nm) : -1;
            input_k++;
            if (v >= 0 && q->v[v].init >= 0 && !q->v[v].is_input && init_removed(q, q->v[v].init))
                continue;
        }
        cge__pbw_raw(out, f.start, (size_t)(f.end - f.start));
    }
    cge__pbw_raw(out, nodes.data, nodes.len);
    cge__pbw_raw(out, inits.data, inits.len);
    bool oom_ = nodes.oom || inits.oom || out->oom;
    cge__pbw_free(&nodes);
    cge__pbw_free(&inits);
    if (bad)
        return cge__onnx_io_error(&q->cx, "the graph's protobuf framing is malformed");
    return oom_ ? oom() : CGE_OK;
}

/* The model: ir_version and the default opset raised where needed,
 * com.microsoft imported for MatMulNBits, the graph rewritten, the rest
 * verbatim. */
static cge_status write_model(qctx *q, cge__pbw *out)
{
    size_t pos = 0;
    bool bad = false, have_ms = false;
    cge__pb_field f;
    /* IR 10 brought the 4-bit types, 7 goes with opset 13 */
    int64_t ir_min = q->opset_out >= 21 ? 10 : q->opset_out >= 13 ? 7 : 0;
    while (cge__pb_next(q->data, q->size, &pos, &f, &bad)) {
        if (f.number == 1 && f.wire == 0 && (int64_t)f.varint < ir_min) {
            cge__pbw_int(out, 1, ir_min);
            continue;
        }
        if (f.number == 7 && f.wire == 2) {
            cge__pbw sub = {0};
            cge_status st = write_graph(q, q->m, f.payload, f.payload_len, &sub);
            if (!st)
                cge__pbw_message(out, 7, &sub);
            cge__pbw_free(&sub);
            if (st)
                return st;
            continue;
        }
        if (f.number == 8 && f.wire == 2) {
            Onnx__OperatorSetIdProto *o =
                onnx__operator_set_id_proto__unpack(NULL, f.payload_len, f.payload);
            if (!o)
                return cge__onnx_io_error(&q->cx, "an opset_import entry does not decode");
            bool dflt = is_default_domain(o->domain);
            have_ms |= o->domain && !strcmp(o->domain, "com.microsoft");
            onnx__operator_set_id_proto__free_unpacked(o, NULL);
            if (dflt) {
                cge__onnx_write_opset(out, 8, "", q->opset_out);
                continue;
            }
        }
        cge__pbw_raw(out, f.start, (size_t)(f.end - f.start));
    }
    if (bad)
        return cge__onnx_io_error(&q->cx, "the model's protobuf framing is malformed");
    if (q->o->weights_only_bits && q->o->weights_only_format != 1 && !have_ms)
        cge__onnx_write_opset(out, 8, "com.microsoft", 1);
    return out->oom ? oom() : CGE_OK;
}

/* ---- entry point -------------------------------------------------------- */

static cge_status read_model(const char *path, uint8_t **data, size_t *size)
{
    const char *why = NULL;
    FILE *f = cge__fopen_regular(path, size, &why);
    if (!f)
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: cannot open: %s", path, why);
    *data = malloc(*size ? *size : 1);
    size_t got = *data && *size ? fread(*data, 1, *size, f) : 0;
    fclose(f);
    if (!*data)
        return oom();
    if (got != *size)
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: read %zu of %zu bytes", path, got, *size);
    return CGE_OK;
}

static cge_status write_file(const char *path, const cge__pbw *w)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    size_t put = fwrite(w->data, 1, w->len, f);
    int closed = fclose(f);
    if (put != w->len || closed) {
        remove(path);
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: write failed", path);
    }
    return CGE_OK;
}

/* Everything between reading the model and writing the result. */
static cge_status quantize(qctx *q)
{
    cge_status st;
    if (!q->size)
        return cge__onnx_io_error(&q->cx, "empty file: not an ONNX model");
    if ((st = cge__onnx_check_wire(&q->cx, q->data, q->size, &onnx__model_proto__descriptor)))
        return st;
    q->m = onnx__model_proto__unpack(NULL, q->size, q->data);
    if (!q->m || !q->m->graph)
        return cge__onnx_io_error(&q->cx, "not an ONNX model (protobuf decoding failed or no "
                                         "graph)");
    q->g = q->m->graph;
    q->opset = -1;
    for (size_t i = 0; i < q->m->n_opset_import; i++)
        if (is_default_domain(q->m->opset_import[i]->domain))
            q->opset = q->m->opset_import[i]->version;
    if (q->opset < 1)
        return cge__onnx_io_error(&q->cx, "the model imports no default (ai.onnx) opset");
    q->rep->opset_in = q->opset;
    if ((st = build_values(q)))
        return st;
    for (int32_t i = 0; i < q->o->num_exclude; i++) {
        bool found = false;
        for (size_t k = 0; !found && k < q->g->n_node; k++)
            found = q->g->node[k]->name && q->o->exclude[i] &&
                    !strcmp(q->g->node[k]->name, q->o->exclude[i]);
        if (!found)
            return cge__onnx_unsupported(&q->cx, "--exclude '%s': the graph has no node of that "
                                                "name", q->o->exclude[i] ? q->o->exclude[i] : "");
    }
    if (q->o->activation_type < 0 || q->o->activation_type > 2)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "quantize: activation_type is 0 (uint8), 1 (int8) or 2 (int8 "
                         "symmetric), not %d", (int)q->o->activation_type);
    if ((st = choose_opset(q)))
        return st;
    if (q->o->weights_only_bits) {
        if ((st = decide_nbits(q)))
            return st;
    } else {
        if ((st = check_samples(q)))
            return st;
        decide_qdq(q);
        /* One calibrated range per distinct value asked for. */
        int32_t *range_idx = malloc(sizeof(int32_t) * (size_t)(q->nv + 1));
        const char **names = malloc(sizeof(char *) * (size_t)(q->nv + 1));
        cge__qrange *ranges = calloc((size_t)q->nv + 1, sizeof *ranges);
        int32_t nr = 0;
        st = range_idx && names && ranges ? CGE_OK : oom();
        for (int32_t v = 0; !st && v < q->nv; v++)
            range_idx[v] = -1;
        for (int32_t v = 0; !st && v < q->nv; v++) {
            int32_t r = q->v[v].state == V_QDQ ? q->v[v].range_of : -1;
            if (r >= 0 && range_idx[r] < 0) {
                range_idx[r] = nr;
                names[nr++] = q->v[r].name;
            }
        }
        if (!st && !nr)
            st = cge__onnx_unsupported(&q->cx, "nothing to quantize: no Conv, MatMul, Gemm, Add, "
                                              "Mul, Concat or pooling reads a float activation "
                                              "(or every one is excluded)");
        if (!st)
            st = cge__onnx_calibrate(q->data, q->size, q->base_dir, q->o, names, nr, ranges);
        if (!st)
            st = apply_qdq(q, ranges, range_idx);
        free(range_idx);
        free(names);
        free(ranges);
        if (st)
            return st;
    }
    for (size_t i = 0; i < q->g->n_node; i++) {
        const Onnx__NodeProto *np = q->g->node[i];
        bool eligible = q->o->weights_only_bits
                            ? is_default_domain(np->domain) && !strcmp(np->op_type, "MatMul")
                            : classify(np) != OP_OTHER;
        if (q->n[i].kind == N_KEEP && eligible)
            q->rep->nodes_left_float++;
    }
    q->rep->opset_out = q->opset_out;
    return CGE_OK;
}

cge_status cge_onnx_quantize(const char *path_in, const char *path_out,
                             const cge_quantize_options *opts, cge_quantize_report *report)
{
    cge_quantize_report local;
    cge_quantize_report *rep = report ? report : &local;
    memset(rep, 0, sizeof *rep);
    if (!path_in || !path_in[0] || !path_out || !path_out[0] || !opts)
        return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG,
                         "quantize: an input path, an output path and options are needed");
    cge_status st = cge_onnx_register_converters();
    if (st)
        return st;
    qctx q = {.label = path_in, .o = opts, .rep = rep};
    q.cx = (onnx_ctx){.label = path_in};
    cge__strmap_init(&q.vmap);
    cge__strmap_init(&q.taken);
    /* External data is resolved against the model's folder, as the importer does. */
    char *dir = strdup(path_in);
    if (!dir)
        return oom();
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    q.base_dir = q.cx.base_dir = dir;
    uint8_t *data = NULL;
    st = read_model(path_in, &data, &q.size);
    q.data = data;
    if (!st)
        st = quantize(&q);
    cge__pbw out = {0};
    if (!st)
        st = write_model(&q, &out);
    if (!st)
        st = write_file(path_out, &out);
    cge__pbw_free(&out);
    for (int32_t k = 0; k < q.nw; k++) {
        free(q.w[k].q.data);
        free(q.w[k].scales);
        free(q.w[k].zps);
    }
    free(q.w);
    for (size_t i = 0; q.n && q.g && i < q.g->n_node; i++) {
        free(q.n[i].in_name);
        free(q.n[i].out_name);
    }
    free(q.n);
    for (size_t i = 0; q.inits && q.g && i < q.g->n_initializer; i++)
        free(q.inits[i].data);
    free(q.inits);
    for (int32_t i = 0; i < q.nstrs; i++)
        free(q.strs[i]);
    free(q.strs);
    free(q.v);
    cge__strmap_free(&q.vmap);
    cge__strmap_free(&q.taken);
    if (q.m)
        onnx__model_proto__free_unpacked(q.m, NULL);
    free(data);
    free(dir);
    return st;
}
