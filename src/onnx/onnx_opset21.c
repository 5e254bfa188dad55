/* ONNX opsets 19-21: converters for the operators whose definitions changed
 * there (4-bit QuantizeLinear, Cast's saturate, Pad's wrap, ...), and clear
 * [converter] errors for the changes cge does not implement. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"
#include "cge/op.h"

/* Operators not named here have the same meaning at 19-21 as at 18, or only
 * gained dtypes (int4/uint4 are unpacked into int8/uint8 on import; float8
 * and string tensors are refused there): DequantizeLinear (block_size is
 * its definition's, src/ops/quant.c), Constant, Identity, Reshape, Shape,
 * Size, Flatten, Squeeze, Unsqueeze, Transpose, If, Loop, Scan,
 * ConstantOfShape, Equal, IsInf, IsNaN, ReduceMax, ReduceMin, QLinearMatMul.
 * Gelu (20) is a definition of its own. */

static cge_status refuse(const cge_node *src, int64_t opset, const char *why)
{
    return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_UNSUPPORTED,
                     "%s '%s' (opset %lld): %s is not supported", cge_node_op_type(src),
                     cge_node_name(src), (long long)opset, why);
}

/* The 1:1 mapping onto `op`, less the attributes named in drop; *out is the
 * node made. */
static cge_status same_less(const cge_node *src, int64_t opset, cge_graph *dst, const char *op,
                            const char *const *drop, cge_node **out)
{
    const cge_converter_def same = {.target_op = op, .target_domain = ""};
    cge_status st = cge_converter_apply(&same, src, opset, dst);
    cge_node *n = st ? NULL : cge_graph_node(dst, cge_graph_num_nodes(dst) - 1);
    for (; !st && drop && *drop; drop++)
        if (cge_attrs_find(cge_node_attrs(n), *drop))
            st = cge_attrs_remove(cge_node_attrs(n), *drop);
    if (out)
        *out = n;
    return st;
}

/* ONNX's float8 types (17-20) and 4-bit ones (21, 22), as `to` / output_dtype. */
static bool is_float8(int64_t t) { return t >= 17 && t <= 20; }

/* QuantizeLinear 19-21. A 4-bit output (output_dtype, or a 4-bit zero point
 * noted by the importer) is the 8-bit quantisation clipped to [-8, 7] /
 * [0, 15]: saturating to the wider range first changes nothing, as the
 * narrower one lies inside it. The int8 result then reads like any other
 * (fuse_qdq sees QuantizeLinear -> Clip, and keeps the Clip). */
static cge_status convert_quantize(const cge_node *src, int64_t opset, cge_graph *dst)
{
    int64_t od = cge_attrs_get_int(cge_node_attrs_const(src), "output_dtype", 0);
    if (is_float8(od))
        return refuse(src, opset, "a float8 output_dtype");
    cge_node *n = NULL;
    cge_status st = same_less(src, opset, dst, "QuantizeLinear", NULL, &n);
    if (st || (od != 21 && od != 22))
        return st;
    bool sgn = od == 22;
    const char *y = cge_node_output(src, 0), *node = cge_node_name(src);
    char q8[512], lo[512], hi[512], cname[512];
    cge__onnx_fresh_name(dst, y, "8bit", q8, sizeof q8);
    cge__onnx_fresh_name(dst, y, "int4_min", lo, sizeof lo);
    cge__onnx_fresh_name(dst, y, "int4_max", hi, sizeof hi);
    st = cge_node_set_int(n, "output_dtype", sgn ? 3 : 2);
    if (!st)
        st = cge_node_set_output(n, 0, q8);
    cge_shape scalar = {.rank = 0};
    uint8_t lov = sgn ? (uint8_t)(int8_t)-8 : 0, hiv = sgn ? 7 : 15;
    cge_dtype t = sgn ? CGE_I8 : CGE_U8;
    if (!st)
        st = cge_graph_add_constant(dst, lo, t, &scalar, &lov, 1);
    if (!st)
        st = cge_graph_add_constant(dst, hi, t, &scalar, &hiv, 1);
    const char *ins[3] = {q8, lo, hi};
    snprintf(cname, sizeof cname, "%s/4bit_range", node);
    if (!st)
        st = cge_graph_add_node(dst, "Clip", "", cname, ins, 3, &y, 1, NULL);
    return st;
}

/* Cast / CastLike 19-21: saturate only concerns float8 targets. */
static cge_status convert_cast(const cge_node *src, int64_t opset, cge_graph *dst)
{
    int64_t to = cge_attrs_get_int(cge_node_attrs_const(src), "to", 0);
    if (is_float8(to))
        return refuse(src, opset, "a cast to float8");
    if (to == 21 || to == 22)
        return refuse(src, opset, "a cast to int4/uint4");
    static const char *const drop[] = {"saturate", NULL};
    return same_less(src, opset, dst, cge_node_op_type(src), drop, NULL);
}

/* A constant int64 (or int32) vector input of dst, into v (at most cap
 * values); its length, or -1. */
static int64_t const_ints(const cge_graph *dst, const char *name, int64_t *v, int64_t cap)
{
    const cge_tensor *t = name[0] ? cge_graph_constant(dst, name) : NULL;
    if (!t) {
        cge_clear_error();
        return -1;
    }
    int64_t n = cge_shape_numel(&t->shape);
    if (t->shape.rank > 1 || n > cap || (t->dtype != CGE_I64 && t->dtype != CGE_I32))
        return -1;
    for (int64_t i = 0; i < n; i++)
        v[i] = t->dtype == CGE_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    return n;
}

/* Pad 19-21 adds mode "wrap" (circular): along each padded axis, the last b
 * elements before and the first e after, i.e. Concat(Slice(x, -b:), x,
 * Slice(x, :e)) axis by axis. Needs constant pads (and axes), x's dims
 * known and every pad within them (a pad longer than the axis would wrap
 * more than once); negative pads are refused. */
static cge_status convert_pad(const cge_node *src, int64_t opset, cge_graph *dst)
{
    if (strcmp(cge_attrs_get_string(cge_node_attrs_const(src), "mode", "constant"), "wrap"))
        return same_less(src, opset, dst, "Pad", NULL, NULL);
    int32_t ni = cge_node_num_inputs(src);
    const char *x = cge_node_input(src, 0), *y = cge_node_output(src, 0);
    cge_tensor_desc xd;
    bool known = cge_graph_get_desc(dst, x, &xd) == CGE_OK && cge_shape_is_static(&xd.shape);
    if (!known)
        cge_clear_error();
    int64_t pads[2 * CGE_MAX_RANK], axes[CGE_MAX_RANK];
    int64_t np = ni > 1 ? const_ints(dst, cge_node_input(src, 1), pads, 2 * CGE_MAX_RANK) : -1;
    int64_t na = ni > 3 && cge_node_input(src, 3)[0]
                     ? const_ints(dst, cge_node_input(src, 3), axes, CGE_MAX_RANK)
                     : -2;
    int32_t r = known ? xd.shape.rank : 0;
    if (!known || np < 0 || na == -1 || np % 2 || (na == -2 && np != 2 * r) ||
        (na >= 0 && np != 2 * na))
        return refuse(src, opset, "mode 'wrap' without constant pads (and axes) and known dims");
    int64_t naxes = np / 2;
    char cur[512], next[512], part[3][512], nn[512], cst[3][512];
    snprintf(cur, sizeof cur, "%s", x);
    cge_status st = CGE_OK;
    int done = 0, todo = 0;
    for (int64_t i = 0; i < naxes; i++)
        todo += pads[i] != 0 || pads[naxes + i] != 0;
    for (int64_t i = 0; !st && i < naxes; i++) {
        int64_t ax = na >= 0 ? axes[i] : i, b = pads[i], e = pads[naxes + i];
        if (ax < 0)
            ax += r;
        if (ax < 0 || ax >= r)
            return refuse(src, opset, "mode 'wrap' with an axis out of range");
        int64_t d = xd.shape.dims[ax];
        if (b < 0 || e < 0 || b > d || e > d)
            return refuse(src, opset, "mode 'wrap' with negative pads or pads longer than the "
                                      "axis");
        if (!b && !e)
            continue;
        /* tail [d - b, d) and head [0, e) of axis ax */
        const char *pieces[3];
        int k = 0;
        int64_t se[2][2] = {{d - b, d}, {0, e}};
        for (int w = 0; w < 2 && !st; w++) {
            if (!(w == 0 ? b : e))
                continue;
            const char *names[3] = {"starts", "ends", "axes"};
            int64_t vals[3] = {se[w][0], se[w][1], ax};
            cge_shape one = CGE_SHAPE(1);
            for (int c = 0; c < 3 && !st; c++) {
                cge__onnx_fresh_name(dst, y, names[c], cst[c], sizeof cst[c]);
                st = cge_graph_add_constant(dst, cst[c], CGE_I64, &one, &vals[c], sizeof vals[c]);
            }
            cge__onnx_fresh_name(dst, y, w == 0 ? "wrap_tail" : "wrap_head", part[w],
                                 sizeof part[w]);
            const char *sin[4] = {cur, cst[0], cst[1], cst[2]}, *so = part[w];
            snprintf(nn, sizeof nn, "%s/wrap_%lld_%s", cge_node_name(src), (long long)ax,
                     w == 0 ? "tail" : "head");
            if (!st)
                st = cge_graph_add_node(dst, "Slice", "", nn, sin, 4, &so, 1, NULL);
        }
        if (b)
            pieces[k++] = part[0];
        pieces[k++] = cur;
        if (e)
            pieces[k++] = part[1];
        bool last = ++done == todo;
        if (!last)
            cge__onnx_fresh_name(dst, y, "wrapped", next, sizeof next);
        const char *co = last ? y : next;
        cge_node *n = NULL;
        if (last)
            snprintf(nn, sizeof nn, "%s", cge_node_name(src));
        else
            snprintf(nn, sizeof nn, "%s/wrap_%lld", cge_node_name(src), (long long)ax);
        if (!st)
            st = cge_graph_add_node(dst, "Concat", "", nn, pieces, k, &co, 1, &n);
        if (!st)
            st = cge_node_set_int(n, "axis", ax);
        if (!last)
            snprintf(cur, sizeof cur, "%s", next);
    }
    if (!st && !todo) {
        cge_node *n = NULL;
        st = cge_graph_add_node(dst, "Identity", "", cge_node_name(src), &x, 1, &y, 1, &n);
    }
    return st;
}

/* AveragePool 19 adds dilations. */
static cge_status convert_average_pool(const cge_node *src, int64_t opset, cge_graph *dst)
{
    const int64_t *d = NULL;
    int64_t nd = cge_attrs_get_ints(cge_node_attrs_const(src), "dilations", &d);
    for (int64_t i = 0; i < nd; i++)
        if (d[i] != 1)
            return refuse(src, opset, "dilations other than 1");
    static const char *const drop[] = {"dilations", NULL};
    return same_less(src, opset, dst, "AveragePool", drop, NULL);
}

/* Resize 19 adds coordinate_transformation_mode "half_pixel_symmetric":
 * half_pixel shifted by center * (1 - output_int / output), where output is
 * scale * input. It is half_pixel wherever scale * input is a whole number:
 * always with sizes (stretch: the scales are sizes / input; the shift left
 * is float rounding), and with constant scales when the input's dims are
 * known and every scale * dim is whole. Other cases are refused. */
static cge_status convert_resize(const cge_node *src, int64_t opset, cge_graph *dst)
{
    const cge_attrs *a = cge_node_attrs_const(src);
    const char *c = cge_attrs_get_string(a, "coordinate_transformation_mode", "half_pixel");
    if (strcmp(c, "half_pixel_symmetric"))
        return same_less(src, opset, dst, "Resize", NULL, NULL);
    int32_t ni = cge_node_num_inputs(src);
    bool sizes = ni > 3 && cge_node_input(src, 3)[0];
    bool whole = sizes && !strcmp(cge_attrs_get_string(a, "keep_aspect_ratio_policy", "stretch"),
                                  "stretch");
    const cge_tensor *sc = !sizes && ni > 2 && cge_node_input(src, 2)[0]
                               ? cge_graph_constant(dst, cge_node_input(src, 2))
                               : NULL;
    cge_tensor_desc xd;
    if (sc && sc->dtype == CGE_F32 &&
        cge_graph_get_desc(dst, cge_node_input(src, 0), &xd) == CGE_OK &&
        cge_shape_is_static(&xd.shape)) {
        const int64_t *ax = NULL;
        int64_t nax = cge_attrs_get_ints(a, "axes", &ax), ns = cge_shape_numel(&sc->shape);
        whole = ns == (nax > 0 ? nax : xd.shape.rank);
        for (int64_t i = 0; whole && i < ns; i++) {
            int64_t d = nax > 0 ? (ax[i] < 0 ? ax[i] + xd.shape.rank : ax[i]) : i;
            float o = d >= 0 && d < xd.shape.rank
                          ? (float)xd.shape.dims[d] * ((const float *)sc->data)[i]
                          : 0.5f;
            whole = o == floorf(o);
        }
    }
    cge_clear_error();
    if (!whole)
        return refuse(src, opset, "coordinate_transformation_mode 'half_pixel_symmetric' with "
                                  "scales that do not give whole output sizes (or unknown ones)");
    cge_node *n = NULL;
    cge_status st = same_less(src, opset, dst, "Resize", NULL, &n);
    if (!st)
        st = cge_node_set_string(n, "coordinate_transformation_mode", "half_pixel");
    return st;
}

/* GridSample 20 renames its modes (bilinear -> linear, bicubic -> cubic) and
 * makes linear the default. */
static cge_status convert_grid_sample(const cge_node *src, int64_t opset, cge_graph *dst)
{
    const char *m = cge_attrs_get_string(cge_node_attrs_const(src), "mode", "linear");
    const char *old = !strcmp(m, "linear") ? "bilinear" : !strcmp(m, "cubic") ? "bicubic" : m;
    cge_node *n = NULL;
    cge_status st = same_less(src, opset, dst, "GridSample", NULL, &n);
    if (!st)
        st = cge_node_set_string(n, "mode", old);
    return st;
}

/* DFT 20 moves axis from an attribute to input 2 (an int64 scalar, default
 * -2, counted as 17's attribute was): a constant axis input becomes 17's
 * attribute. */
static cge_status convert_dft(const cge_node *src, int64_t opset, cge_graph *dst)
{
    int32_t ni = cge_node_num_inputs(src);
    int64_t axis = -2;
    if (ni > 2 && cge_node_input(src, 2)[0]) {
        const cge_tensor *t = cge_graph_constant(dst, cge_node_input(src, 2));
        if (!t || cge_shape_numel(&t->shape) != 1 ||
            (t->dtype != CGE_I64 && t->dtype != CGE_I32)) {
            cge_clear_error();
            return refuse(src, opset, "DFT 20 with an axis that is not a constant integer");
        }
        axis = t->dtype == CGE_I64 ? *(const int64_t *)t->data : *(const int32_t *)t->data;
    }
    if (cge_attrs_find(cge_node_attrs_const(src), "axis"))
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "DFT '%s' (opset %lld): axis is an input from opset 20 on",
                         cge_node_name(src), (long long)opset);
    const char *ins[2] = {cge_node_input(src, 0), ni > 1 ? cge_node_input(src, 1) : ""};
    const char *y = cge_node_output(src, 0);
    cge_node *n = NULL;
    cge_status st = cge_graph_add_node(dst, "DFT", "", cge_node_name(src), ins,
                                       ni > 1 && ins[1][0] ? 2 : 1, &y, 1, &n);
    const cge_attrs *a = cge_node_attrs_const(src);
    for (int32_t i = 0; !st && i < cge_attrs_count(a); i++)
        st = cge_attrs_set(cge_node_attrs(n), cge_attrs_at(a, i));
    if (!st)
        st = cge_node_set_int(n, "axis", axis);
    return st;
}

/* GroupNormalization 21 takes scale and bias per channel ([C]) where 18
 * took them per group: 18's normalisation with unit scale and zero bias,
 * then a BatchNormalization with mean 0, variance 1 and epsilon 0, which is
 * exactly y * scale[c] + bias[c] along axis 1 for any rank (1 / sqrt(1) is
 * 1). C comes from scale's shape, which must be known (an initializer). */
static cge_status convert_group_norm(const cge_node *src, int64_t opset, cge_graph *dst)
{
    const cge_attrs *a = cge_node_attrs_const(src);
    int64_t G = cge_attrs_get_int(a, "num_groups", 0);
    if (cge_node_num_inputs(src) != 3 || cge_node_num_outputs(src) != 1 || G < 1)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "GroupNormalization '%s' (opset %lld): wants X, scale, bias, one output "
                         "and num_groups >= 1", cge_node_name(src), (long long)opset);
    const char *x = cge_node_input(src, 0), *sc = cge_node_input(src, 1);
    const char *bi = cge_node_input(src, 2), *y = cge_node_output(src, 0);
    cge_tensor_desc sd;
    if (cge_graph_get_desc(dst, sc, &sd) != CGE_OK || sd.shape.rank != 1 || sd.shape.dims[0] < 1 ||
        sd.dtype != CGE_F32) {
        cge_clear_error();
        return refuse(src, opset, "GroupNormalization 21 with a scale that is not a known "
                                  "float32 [C] tensor");
    }
    int64_t C = sd.shape.dims[0];
    if (G > C || C > ((int64_t)1 << 24))
        return refuse(src, opset, "num_groups above the channel count");
    float *ones = malloc(sizeof(float) * (size_t)C), *zeros = calloc((size_t)C, sizeof(float));
    cge_status st = ones && zeros ? CGE_OK
                                  : cge_error(CGE_LAYER_CONVERTER, CGE_ERR_NO_MEMORY,
                                              "GroupNormalization: out of memory");
    for (int64_t i = 0; !st && i < C; i++)
        ones[i] = 1.0f;
    char g1[512], g0[512], c1[512], c0[512], norm[512], nn[512];
    cge__onnx_fresh_name(dst, y, "group_ones", g1, sizeof g1);
    cge__onnx_fresh_name(dst, y, "group_zeros", g0, sizeof g0);
    cge__onnx_fresh_name(dst, y, "channel_ones", c1, sizeof c1);
    cge__onnx_fresh_name(dst, y, "channel_zeros", c0, sizeof c0);
    cge__onnx_fresh_name(dst, y, "normalised", norm, sizeof norm);
    cge_shape gs = CGE_SHAPE(G), cs = CGE_SHAPE(C);
    if (!st)
        st = cge_graph_add_constant(dst, g1, CGE_F32, &gs, ones, sizeof(float) * (size_t)G);
    if (!st)
        st = cge_graph_add_constant(dst, g0, CGE_F32, &gs, zeros, sizeof(float) * (size_t)G);
    if (!st)
        st = cge_graph_add_constant(dst, c1, CGE_F32, &cs, ones, sizeof(float) * (size_t)C);
    if (!st)
        st = cge_graph_add_constant(dst, c0, CGE_F32, &cs, zeros, sizeof(float) * (size_t)C);
    free(ones);
    free(zeros);
    const char *gin[3] = {x, g1, g0}, *o1 = norm;
    cge_node *n = NULL;
    snprintf(nn, sizeof nn, "%s/groups", cge_node_name(src));
    if (!st)
        st = cge_graph_add_node(dst, "GroupNormalization", "", nn, gin, 3, &o1, 1, &n);
    if (!st)
        st = cge_node_set_int(n, "num_groups", G);
    if (!st)
        st = cge_node_set_float(n, "epsilon", cge_attrs_get_float(a, "epsilon", 1e-5f));
    const char *bin[5] = {norm, sc, bi, c0, c1};
    if (!st)
        st = cge_graph_add_node(dst, "BatchNormalization", "", cge_node_name(src), bin, 5, &y, 1,
                                &n);
    if (!st)
        st = cge_node_set_float(n, "epsilon", 0.0f);
    return st;
}

static bool is_4bit_type(int32_t t) { return t == 21 || t == 22; }

cge_status cge__onnx_note_4bit_output(const Onnx__GraphProto *gp, const Onnx__NodeProto *np,
                                      int64_t opset, cge_node *src)
{
    const char *dom = np->domain ? np->domain : "";
    if (opset < 21 || (dom[0] && strcmp(dom, "ai.onnx")) || strcmp(np->op_type, "QuantizeLinear") ||
        np->n_input < 3 || !np->input[2][0] || cge_attrs_find(cge_node_attrs(src), "output_dtype"))
        return CGE_OK;
    const char *zp = np->input[2];
    int32_t t = 0;
    for (size_t i = 0; !t && i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (tp && tp->name && !strcmp(tp->name, zp))
            t = tp->data_type;
    }
    /* a Constant node's value (4-bit zero points are rarely anything else) */
    for (size_t i = 0; !t && i < gp->n_node; i++) {
        const Onnx__NodeProto *c = gp->node[i];
        if (!c || !c->op_type || strcmp(c->op_type, "Constant") || c->n_output != 1 ||
            !c->output[0] || strcmp(c->output[0], zp))
            continue;
        for (size_t a = 0; a < c->n_attribute; a++)
            if (c->attribute[a] && c->attribute[a]->t && c->attribute[a]->name &&
                !strcmp(c->attribute[a]->name, "value"))
                t = c->attribute[a]->t->data_type;
        break;
    }
    return is_4bit_type(t) ? cge_node_set_int(src, "output_dtype", t) : CGE_OK;
}

#define SINCE(OP, V, FN)                                                                    \
    {.front_end = "onnx", .source_op = OP, .source_domain = "", .since_version = V,         \
     .target_op = OP, .target_domain = "", .convert = FN}

static const cge_converter_def converters[] = {
    SINCE("QuantizeLinear", 19, convert_quantize),
    SINCE("Cast", 19, convert_cast),
    SINCE("CastLike", 19, convert_cast),
    SINCE("Pad", 19, convert_pad),
    SINCE("AveragePool", 19, convert_average_pool),
    SINCE("Resize", 19, convert_resize),
    SINCE("GridSample", 20, convert_grid_sample),
    SINCE("DFT", 20, convert_dft),
    SINCE("GroupNormalization", 21, convert_group_norm),
};

static const cge_op_library library = {
    .api_version = CGE_OP_API_VERSION,
    .name = "onnx_opset21",
    .converters = converters,
    .num_converters = (int32_t)(sizeof converters / sizeof converters[0]),
};

const cge_op_library *cge__onnx_opset21_library(void) { return &library; }
