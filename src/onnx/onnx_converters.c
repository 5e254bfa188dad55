/* Version-specific ONNX converters for older opsets, registered once as the
 * converter-only library "onnx_converters". */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"
#include "cge/op.h"

/* Older opsets whose semantics match the current definitions map 1:1
 * (attributes that became inputs are promoted by the importer); the rest
 * (Softmax < 13, Upsample, Resize 10, Scatter, Dropout < 10, RoiAlign < 16,
 * BatchNormalization's spatial=0) map onto equivalent nodes, and so does
 * LpNormalization, which has no operator of its own. */

static bool has_value(const cge_graph *g, const char *name)
{
    cge_tensor_desc d;
    if (cge_graph_get_desc(g, name, &d) == CGE_OK)
        return true;
    cge_clear_error();
    return false;
}

/* "<base>/<suffix>", made unique among dst's values. */
static void fresh_name(const cge_graph *dst, const char *base, const char *suffix, char *buf,
                       size_t size)
{
    snprintf(buf, size, "%s/%s", base, suffix);
    for (int k = 1; has_value(dst, buf) && k < 100000; k++)
        snprintf(buf, size, "%s/%s_%d", base, suffix, k);
}

static cge_status add1(cge_graph *dst, const char *op, const char *name, const char *const *ins,
                       int32_t ni, const char *out, cge_node **n)
{
    return cge_graph_add_node(dst, op, "", name, ins, ni, &out, 1, n);
}

/* Softmax, LogSoftmax and Hardmax before opset 13 coerce the input to 2-D at
 * `axis` (default 1) and normalise each row: Flatten -> op(axis=1) ->
 * Reshape back to the input's shape. */
static cge_status convert_coerced_2d(const cge_node *src, int64_t opset, cge_graph *dst)
{
    (void)opset;
    const char *op = cge_node_op_type(src), *node = cge_node_name(src);
    if (cge_node_num_inputs(src) != 1 || cge_node_num_outputs(src) != 1)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "%s '%s' (opset %lld): wants 1 input and 1 output", op, node,
                         (long long)opset);
    const cge_attrs *a = cge_node_attrs_const(src);
    int64_t axis = cge_attrs_get_int(a, "axis", 1);
    const char *x = cge_node_input(src, 0), *y = cge_node_output(src, 0);
    char flat[512], norm[512], shape[512], nname[512];
    fresh_name(dst, y, "flat2d", flat, sizeof flat);
    fresh_name(dst, y, "rows", norm, sizeof norm);
    fresh_name(dst, y, "in_shape", shape, sizeof shape);
    cge_node *n = NULL;
    snprintf(nname, sizeof nname, "%s/flatten", node);
    cge_status st = add1(dst, "Flatten", nname, &x, 1, flat, &n);
    if (!st)
        st = cge_node_set_int(n, "axis", axis);
    const char *fin = flat;
    if (!st)
        st = add1(dst, op, node, &fin, 1, norm, &n);
    if (!st)
        st = cge_node_set_int(n, "axis", 1);
    snprintf(nname, sizeof nname, "%s/shape", node);
    if (!st)
        st = add1(dst, "Shape", nname, &x, 1, shape, NULL);
    const char *rin[2] = {norm, shape};
    snprintf(nname, sizeof nname, "%s/reshape", node);
    if (!st)
        st = add1(dst, "Reshape", nname, rin, 2, y, NULL);
    return st;
}

/* Upsample (7..9) is Resize with asymmetric coordinates and floor rounding;
 * Resize 10 lacks the roi input. Both: Resize(X, "", scales). */
static cge_status convert_to_resize(const cge_node *src, int64_t opset, cge_graph *dst)
{
    const char *op = cge_node_op_type(src), *node = cge_node_name(src);
    const cge_attrs *a = cge_node_attrs_const(src);
    int32_t ni = cge_node_num_inputs(src);
    const char *scales = ni > 1 ? cge_node_input(src, 1) : "";
    const char *y = cge_node_output(src, 0);
    char sname[512];
    cge_status st = CGE_OK;
    const float *sv = NULL;
    int64_t ns = cge_attrs_get_floats(a, "scales", &sv);
    if (!scales[0] && ns > 0 && ns <= CGE_MAX_RANK) {
        /* Upsample 7..8: scales was an attribute. */
        cge_shape shape1 = CGE_SHAPE(ns);
        fresh_name(dst, y, "scales", sname, sizeof sname);
        st = cge_graph_add_constant(dst, sname, CGE_F32, &shape1, sv,
                                    (size_t)ns * sizeof(float));
        scales = sname;
    }
    if (!st && !scales[0])
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "%s '%s' (opset %lld): no scales (attribute or input)", op, node,
                         (long long)opset);
    const char *ins[3] = {cge_node_input(src, 0), "", scales};
    cge_node *n = NULL;
    if (!st)
        st = add1(dst, "Resize", node, ins, 3, y, &n);
    const char *mode = cge_attrs_get_string(a, "mode", "nearest");
    if (!strcmp(mode, "bilinear") || !strcmp(mode, "trilinear"))
        mode = "linear";
    if (!st)
        st = cge_node_set_string(n, "mode", mode);
    if (!st)
        st = cge_node_set_string(n, "coordinate_transformation_mode", "asymmetric");
    if (!st && !strcmp(mode, "nearest"))
        st = cge_node_set_string(n, "nearest_mode", "floor");
    return st;
}

/* RoiAlign before 16 had no coordinate_transformation_mode; its coordinates
 * are 16's "output_half_pixel" (no half-pixel shift), not 16's default. */
static cge_status convert_roi_align10(const cge_node *src, int64_t opset, cge_graph *dst)
{
    if (cge_attrs_find(cge_node_attrs_const(src), "coordinate_transformation_mode"))
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "RoiAlign '%s' (opset %lld): coordinate_transformation_mode is an "
                         "attribute from opset 16 on", cge_node_name(src), (long long)opset);
    const cge_converter_def same = {.target_op = "RoiAlign", .target_domain = ""};
    cge_status st = cge_converter_apply(&same, src, opset, dst);
    if (st)
        return st;
    cge_node *n = cge_graph_node(dst, cge_graph_num_nodes(dst) - 1);
    return cge_node_set_string(n, "coordinate_transformation_mode", "output_half_pixel");
}

/* Dropout 7..9's mask has the data's type (10 made it bool), and these
 * versions have no training mode: the output is the data and the mask ones.
 * Dropout(data) -> output, bool mask; CastLike(bool mask, data) -> mask. The
 * ratio attribute only matters in training, so it is not carried over. */
static cge_status convert_dropout7(const cge_node *src, int64_t opset, cge_graph *dst)
{
    const char *node = cge_node_name(src);
    if (cge_node_num_inputs(src) != 1 || cge_node_num_outputs(src) < 1 ||
        cge_node_num_outputs(src) > 2)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "Dropout '%s' (opset %lld): wants 1 input and 1 or 2 outputs", node,
                         (long long)opset);
    const char *x = cge_node_input(src, 0), *y = cge_node_output(src, 0);
    if (cge_node_num_outputs(src) == 1)
        return add1(dst, "Dropout", node, &x, 1, y, NULL);
    const char *mask = cge_node_output(src, 1);
    char bmask[512], nname[512];
    fresh_name(dst, mask, "bool", bmask, sizeof bmask);
    const char *outs[2] = {y, bmask};
    cge_status st = cge_graph_add_node(dst, "Dropout", "", node, &x, 1, outs, 2, NULL);
    const char *cin[2] = {bmask, x};
    snprintf(nname, sizeof nname, "%s/mask_like_data", node);
    if (!st)
        st = add1(dst, "CastLike", nname, cin, 2, mask, NULL);
    return st;
}

/* BatchNormalization 7..8. spatial=1 (the default) is what later versions
 * always do: 1:1, less the attributes later versions dropped. spatial=0 has
 * scale, B, mean and var of [C, D1, ...], one value per element rather than
 * per channel, which broadcasting elementwise nodes compute:
 * Y = (X - mean) / sqrt(var + epsilon) * scale + B. Inference only: the
 * training outputs (mean, var, saved_*) are not produced. */
static cge_status convert_batch_norm7(const cge_node *src, int64_t opset, cge_graph *dst)
{
    const char *node = cge_node_name(src);
    const cge_attrs *a = cge_node_attrs_const(src);
    if (cge_node_num_inputs(src) != 5 || cge_node_num_outputs(src) < 1)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "BatchNormalization '%s' (opset %lld): wants 5 inputs and an output",
                         node, (long long)opset);
    if (cge_attrs_get_int(a, "spatial", 1) != 0) {
        const cge_converter_def same = {.target_op = "BatchNormalization", .target_domain = ""};
        cge_status st = cge_converter_apply(&same, src, opset, dst);
        cge_node *n = st ? NULL : cge_graph_node(dst, cge_graph_num_nodes(dst) - 1);
        static const char *const dropped[] = {"spatial", "is_test", "consumed_inputs"};
        for (size_t i = 0; !st && i < sizeof dropped / sizeof dropped[0]; i++)
            if (cge_attrs_find(cge_node_attrs(n), dropped[i]))
                st = cge_attrs_remove(cge_node_attrs(n), dropped[i]);
        return st;
    }
    if (cge_node_num_outputs(src) > 1)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_UNSUPPORTED,
                         "BatchNormalization '%s' (opset %lld): spatial=0 in training mode "
                         "(outputs beyond Y) is not supported", node, (long long)opset);
    const char *x = cge_node_input(src, 0), *scale = cge_node_input(src, 1);
    const char *bias = cge_node_input(src, 2), *mean = cge_node_input(src, 3);
    const char *var = cge_node_input(src, 4), *y = cge_node_output(src, 0);
    float eps = cge_attrs_get_float(a, "epsilon", 1e-5f);
    char v[6][512], nn[512];
    static const char *const names[6] = {"eps_f32", "eps", "var_eps", "std", "centred", "normed"};
    for (int i = 0; i < 6; i++)
        fresh_name(dst, y, names[i], v[i], sizeof v[i]);
    cge_shape scalar = {.rank = 0};
    cge_status st = cge_graph_add_constant(dst, v[0], CGE_F32, &scalar, &eps, sizeof eps);
    /* op, its two inputs, its output and a node-name suffix, in order */
    const char *steps[7][5] = {
        {"CastLike", v[0], var, v[1], "eps"},   {"Add", var, v[1], v[2], "var_eps"},
        {"Sqrt", v[2], NULL, v[3], "std"},     {"Sub", x, mean, v[4], "centre"},
        {"Div", v[4], v[3], v[5], "normalise"}, {"Mul", v[5], scale, NULL, "scale"},
        {"Add", NULL, bias, y, "shift"},
    };
    char scaled[512];
    fresh_name(dst, y, "scaled", scaled, sizeof scaled);
    steps[5][3] = scaled;
    steps[6][1] = scaled;
    for (int i = 0; i < 7 && !st; i++) {
        const char *ins[2] = {steps[i][1], steps[i][2]};
        snprintf(nn, sizeof nn, "%s/%s", node, steps[i][4]);
        st = add1(dst, steps[i][0], i == 6 ? node : nn, ins, steps[i][2] ? 2 : 1, steps[i][3],
                  NULL);
    }
    return st;
}

/* LpNormalization (1): x / ||x||_p along axis (p 1 or 2), as
 * ReduceL1 / ReduceL2 (keepdims) and a broadcasting Div. A zero vector gives
 * NaN, as the division in the definition does. */
static cge_status convert_lp_normalization(const cge_node *src, int64_t opset, cge_graph *dst)
{
    const char *node = cge_node_name(src);
    const cge_attrs *a = cge_node_attrs_const(src);
    int64_t p = cge_attrs_get_int(a, "p", 2), axis = cge_attrs_get_int(a, "axis", -1);
    if (cge_node_num_inputs(src) != 1 || cge_node_num_outputs(src) != 1)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "LpNormalization '%s' (opset %lld): wants 1 input and 1 output", node,
                         (long long)opset);
    if (p != 1 && p != 2)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "LpNormalization '%s' (opset %lld): p is %lld; 1 or 2 expected", node,
                         (long long)opset, (long long)p);
    const char *x = cge_node_input(src, 0), *y = cge_node_output(src, 0);
    char axes[512], norm[512], nn[512];
    fresh_name(dst, y, "axes", axes, sizeof axes);
    fresh_name(dst, y, "norm", norm, sizeof norm);
    cge_shape one = CGE_SHAPE(1);
    cge_status st = cge_graph_add_constant(dst, axes, CGE_I64, &one, &axis, sizeof axis);
    const char *rin[2] = {x, axes};
    cge_node *n = NULL;
    snprintf(nn, sizeof nn, "%s/norm", node);
    if (!st)
        st = cge_graph_add_node(dst, p == 1 ? "ReduceL1" : "ReduceL2", "", nn, rin, 2,
                                (const char *[]){norm}, 1, &n);
    if (!st)
        st = cge_node_set_int(n, "keepdims", 1);
    const char *din[2] = {x, norm};
    if (!st)
        st = add1(dst, "Div", node, din, 2, y, NULL);
    return st;
}

#define COMPAT(OP, SINCE)                                                                   \
    {.front_end = "onnx", .source_op = OP, .source_domain = "", .since_version = SINCE,     \
     .target_op = OP, .target_domain = ""}
#define RANGE(OP, SINCE, END, TARGET, FN)                                                   \
    {.front_end = "onnx", .source_op = OP, .source_domain = "", .since_version = SINCE,     \
     .end_version = END, .target_op = TARGET, .target_domain = "", .convert = FN}

/* First ONNX version whose semantics the current definition covers (dtype
 * extensions and negative axes aside); a definition registered for a newer
 * version wins the lookup for the opsets it covers. */
static const cge_converter_def converters[] = {
    /* elementwise */
    COMPAT("Add", 7), COMPAT("Sub", 7), COMPAT("Mul", 7), COMPAT("Div", 7), COMPAT("Pow", 7),
    COMPAT("Equal", 7), COMPAT("Less", 7), COMPAT("Greater", 7), COMPAT("LessOrEqual", 12),
    COMPAT("GreaterOrEqual", 12), COMPAT("And", 7), COMPAT("Or", 7), COMPAT("Xor", 7),
    COMPAT("Not", 1), COMPAT("Mod", 10), COMPAT("BitShift", 11), COMPAT("Where", 9),
    COMPAT("PRelu", 7),
    COMPAT("Abs", 6), COMPAT("Neg", 6), COMPAT("Exp", 6), COMPAT("Log", 6), COMPAT("Sqrt", 6),
    COMPAT("Reciprocal", 6), COMPAT("Sigmoid", 6), COMPAT("Tanh", 6), COMPAT("Relu", 6),
    COMPAT("Floor", 6), COMPAT("Ceil", 6), COMPAT("Erf", 9), COMPAT("Sign", 9), COMPAT("Sin", 7),
    COMPAT("Cos", 7), COMPAT("Tan", 7), COMPAT("Asin", 7), COMPAT("Acos", 7), COMPAT("Atan", 7),
    COMPAT("Sinh", 9), COMPAT("Cosh", 9), COMPAT("Asinh", 9), COMPAT("Acosh", 9),
    COMPAT("Atanh", 9), COMPAT("Round", 11), COMPAT("IsNaN", 9), COMPAT("IsInf", 10),
    COMPAT("LeakyRelu", 6), COMPAT("Elu", 6), COMPAT("Selu", 6), COMPAT("HardSigmoid", 6),
    COMPAT("Softplus", 1), COMPAT("Softsign", 1), COMPAT("ThresholdedRelu", 10),
    COMPAT("Identity", 1), COMPAT("Cast", 6), COMPAT("Clip", 6), COMPAT("Shrink", 9),
    /* variadic: before 8 every input has the output's shape, which the
     * broadcasting definition computes alike */
    COMPAT("Max", 6), COMPAT("Min", 6), COMPAT("Sum", 6), COMPAT("Mean", 6),
    /* matrix */
    COMPAT("MatMul", 1), COMPAT("Gemm", 7), COMPAT("Einsum", 12),
    /* reductions (axes attribute promoted to the input where it moved) */
    COMPAT("ReduceSum", 1), COMPAT("ReduceMean", 1), COMPAT("ReduceMax", 1),
    COMPAT("ReduceMin", 1), COMPAT("ReduceProd", 1), COMPAT("ReduceL1", 1), COMPAT("ReduceL2", 1),
    COMPAT("ReduceLogSum", 1), COMPAT("ReduceLogSumExp", 1), COMPAT("ReduceSumSquare", 1),
    COMPAT("ArgMax", 1), COMPAT("ArgMin", 1),
    /* shape and data movement */
    COMPAT("Reshape", 5), COMPAT("Flatten", 1), COMPAT("Squeeze", 1), COMPAT("Unsqueeze", 1),
    COMPAT("Expand", 8), COMPAT("Shape", 1), COMPAT("Size", 1), COMPAT("Transpose", 1),
    COMPAT("Concat", 4), COMPAT("Split", 2), COMPAT("Slice", 1), COMPAT("Gather", 1),
    COMPAT("GatherElements", 11), COMPAT("GatherND", 11), COMPAT("ScatterElements", 11),
    COMPAT("ScatterND", 11), COMPAT("Tile", 6), COMPAT("Pad", 2), COMPAT("ConstantOfShape", 9),
    COMPAT("Range", 11), COMPAT("NonZero", 9), COMPAT("TopK", 1), COMPAT("OneHot", 9),
    COMPAT("CumSum", 11), COMPAT("DepthToSpace", 1), COMPAT("SpaceToDepth", 1),
    COMPAT("Trilu", 14),
    /* 18 added the max and min reductions, which the 16 definitions have */
    COMPAT("ScatterElements", 18), COMPAT("ScatterND", 18),
    /* quantization (13 adds per-axis scales to 10's definition) and losses */
    COMPAT("QuantizeLinear", 10), COMPAT("DequantizeLinear", 10),
    COMPAT("NegativeLogLikelihoodLoss", 12), COMPAT("SoftmaxCrossEntropyLoss", 12),
    /* neural network */
    COMPAT("Conv", 1), COMPAT("ConvTranspose", 1), COMPAT("MaxPool", 1), COMPAT("AveragePool", 1),
    COMPAT("GlobalAveragePool", 1), COMPAT("GlobalMaxPool", 1), COMPAT("BatchNormalization", 9),
    COMPAT("InstanceNormalization", 6), COMPAT("LRN", 1), COMPAT("Dropout", 10),
    COMPAT("Resize", 11),
    /* later versions only added dtypes, negative axes or documentation */
    COMPAT("MeanVarianceNormalization", 9), COMPAT("LpPool", 2), COMPAT("MaxUnpool", 9),
    COMPAT("NonMaxSuppression", 10), COMPAT("Compress", 9),
    /* recurrent: 14 added only `layout` (default 0, sequence first) */
    COMPAT("RNN", 7), COMPAT("GRU", 7), COMPAT("LSTM", 7),
    /* control flow */
    COMPAT("If", 1), COMPAT("Loop", 1), COMPAT("Scan", 9),
    /* semantic changes */
    RANGE("Softmax", 1, 12, "Softmax", convert_coerced_2d),
    RANGE("LogSoftmax", 1, 12, "LogSoftmax", convert_coerced_2d),
    RANGE("Hardmax", 1, 12, "Hardmax", convert_coerced_2d),
    RANGE("Upsample", 7, 9, "Resize", convert_to_resize),
    RANGE("Resize", 10, 10, "Resize", convert_to_resize),
    RANGE("Scatter", 9, 10, "ScatterElements", NULL),
    RANGE("Dropout", 7, 9, "Dropout", convert_dropout7),
    RANGE("BatchNormalization", 7, 8, "BatchNormalization", convert_batch_norm7),
    RANGE("LpNormalization", 1, 0, "Div", convert_lp_normalization),
    RANGE("RoiAlign", 10, 15, "RoiAlign", convert_roi_align10),
};

static const cge_op_library library = {
    .api_version = CGE_OP_API_VERSION,
    .name = "onnx_converters",
    .converters = converters,
    .num_converters = (int32_t)(sizeof converters / sizeof converters[0]),
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cge_status registered;

/* The opset 19-21 and com.microsoft QOperator converters (onnx_opset21.c,
 * onnx_qoperator.c) are libraries of their own, registered with this one. */
static void register_once(void)
{
    registered = cge_op_register_library(&library);
    if (!registered)
        registered = cge_op_register_library(cge__onnx_opset21_library());
    if (!registered)
        registered = cge_op_register_library(cge__onnx_qoperator_library());
}

void cge__onnx_fresh_name(const cge_graph *dst, const char *base, const char *suffix, char *buf,
                          size_t size)
{
    fresh_name(dst, base, suffix, buf, size);
}

cge_status cge_onnx_register_converters(void)
{
    pthread_once(&once, register_once);
    if (registered)
        return cge_error(CGE_LAYER_CONVERTER, registered,
                         "the ONNX importer's converters could not be registered");
    return CGE_OK;
}
