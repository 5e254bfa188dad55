/* ONNX Runtime's com.microsoft QOperator ops (QLinearAdd, QLinearMul,
 * QLinearConcat, QLinearSigmoid, ..., QGemm, DynamicQuantizeMatMul), as its
 * quantizer writes them: each becomes DequantizeLinear -> float op ->
 * QuantizeLinear, which fuse_qdq turns into cge's int8 operators. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"
#include "cge/op.h"

/* Why decompose: ContribOperators.md defines every one of them as
 * "Dequantize(inputs) -> the float op -> Quantize(output)" (QLinearAdd:
 * C = (A_scale (A - A_zp) + B_scale (B - B_zp)) / C_scale + C_zp), which is
 * what the three nodes compute, rounding half to even and saturating as
 * QuantizeLinear does. fuse_qdq then gives them the int8 kernels QDQ models
 * get (QAdd, QMul, QLookup, QPool, the int8 Concat, QMatMul) with the same
 * bits as the unfused nodes. ONNX Runtime's own kernels fold the scales
 * into one ratio first, so its results can differ by one step at ties. */

typedef struct qo {
    const cge_node *src;
    int64_t opset;
    cge_graph *dst;
    const char *node;
    int k;                          /* nodes made so far, for their names */
} qo;

static cge_status bad(const qo *c, const char *msg)
{
    return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG, "%s '%s' (com.microsoft %lld): %s",
                     cge_node_op_type(c->src), c->node, (long long)c->opset, msg);
}

static cge_status unsupported(const qo *c, const char *what)
{
    return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_UNSUPPORTED,
                     "%s '%s' (com.microsoft %lld): %s is not supported", cge_node_op_type(c->src),
                     c->node, (long long)c->opset, what);
}

static const char *in(const qo *c, int32_t i)
{
    return i < cge_node_num_inputs(c->src) ? cge_node_input(c->src, i) : "";
}

/* A node of the decomposition: trailing absent inputs dropped; `out` NULL
 * makes a fresh value named after the node's output, written to buf. */
static cge_status add(qo *c, const char *op, const char *const *ins, int32_t ni, const char *out,
                      char *buf, size_t bufsz, cge_node **n)
{
    while (ni > 0 && !ins[ni - 1][0])
        ni--;
    char name[512];
    snprintf(name, sizeof name, "%s/%s_%d", c->node, op, c->k++);
    if (!out) {
        char tag[64];
        snprintf(tag, sizeof tag, "%s_%d", op, c->k);
        cge__onnx_fresh_name(c->dst, cge_node_output(c->src, 0), tag, buf, bufsz);
        out = buf;
    }
    return cge_graph_add_node(c->dst, op, "", name, ins, ni, &out, 1, n);
}

static cge_status dequant(qo *c, const char *x, const char *s, const char *z, int64_t axis,
                          char *out, size_t outsz)
{
    const char *ins[3] = {x, s, z};
    cge_node *n = NULL;
    cge_status st = add(c, "DequantizeLinear", ins, 3, NULL, out, outsz, &n);
    if (!st && axis != 1)
        st = cge_node_set_int(n, "axis", axis);
    return st;
}

/* The dtype of a value already in dst (an initializer, a graph input), or
 * UNDEFINED. */
static cge_dtype known_dtype(const cge_graph *g, const char *name)
{
    cge_tensor_desc d;
    if (!name[0])
        return CGE_DTYPE_UNDEFINED;
    if (cge_graph_get_desc(g, name, &d) == CGE_OK)
        return d.dtype;
    cge_clear_error();
    return CGE_DTYPE_UNDEFINED;
}

/* Quantize f into y with scale s and zero point z. The contrib ops' output
 * zero point is optional and then 0 of the input's type, int8 or uint8;
 * QuantizeLinear without one writes uint8, so for an int8 input (seen
 * through its zero point or itself) a 0 of int8 is made. */
static cge_status quant(qo *c, const char *f, const char *s, const char *z, const char *like_zp,
                        const char *like_x, const char *y)
{
    char zbuf[512];
    if (!z[0]) {
        cge_dtype t = known_dtype(c->dst, like_zp);
        if (t == CGE_DTYPE_UNDEFINED)
            t = known_dtype(c->dst, like_x);
        if (t == CGE_I8) {
            int8_t zero = 0;
            cge_shape scalar = {.rank = 0};
            cge__onnx_fresh_name(c->dst, y, "zero_point", zbuf, sizeof zbuf);
            cge_status st = cge_graph_add_constant(c->dst, zbuf, CGE_I8, &scalar, &zero, 1);
            if (st)
                return st;
            z = zbuf;
        }
    }
    const char *ins[3] = {f, s, z};
    return add(c, "QuantizeLinear", ins, 3, y, NULL, 0, NULL);
}

/* X, X_scale, X_zero_point, Y_scale, Y_zero_point -> Q(op(DQ(X))). */
static cge_status unary(qo *c, const char *op, cge_node **opnode)
{
    int32_t ni = cge_node_num_inputs(c->src);
    if (ni < 4 || ni > 5)
        return bad(c, "wants 4 or 5 inputs (X, X_scale, X_zero_point, Y_scale, Y_zero_point)");
    char x[512], f[512];
    cge_status st = dequant(c, in(c, 0), in(c, 1), in(c, 2), 1, x, sizeof x);
    const char *xi = x;
    if (!st)
        st = add(c, op, &xi, 1, NULL, f, sizeof f, opnode);
    if (!st)
        st = quant(c, f, in(c, 3), in(c, 4), in(c, 2), in(c, 0), cge_node_output(c->src, 0));
    return st;
}

#define CONVERTER(NAME)                                                                     \
    static cge_status NAME##_body(qo *c);                                                   \
    static cge_status NAME(const cge_node *src, int64_t opset, cge_graph *dst)              \
    {                                                                                       \
        qo c = {.src = src, .opset = opset, .dst = dst, .node = cge_node_name(src)};        \
        if (cge_node_num_outputs(src) != 1)                                                 \
            return bad(&c, "wants one output");                                       \
        return NAME##_body(&c);                                                             \
    }                                                                                       \
    static cge_status NAME##_body(qo *c)

static cge_status binary(qo *c, const char *op)
{
    int32_t ni = cge_node_num_inputs(c->src);
    if (ni < 7 || ni > 8)
        return bad(c, "wants 7 or 8 inputs (A, A_scale, A_zero_point, B, B_scale, B_zero_point, "
                      "C_scale, C_zero_point)");
    char a[512], b[512], f[512];
    cge_status st = dequant(c, in(c, 0), in(c, 1), in(c, 2), 1, a, sizeof a);
    if (!st)
        st = dequant(c, in(c, 3), in(c, 4), in(c, 5), 1, b, sizeof b);
    const char *ab[2] = {a, b};
    if (!st)
        st = add(c, op, ab, 2, NULL, f, sizeof f, NULL);
    if (!st)
        st = quant(c, f, in(c, 6), in(c, 7), in(c, 2), in(c, 0), cge_node_output(c->src, 0));
    return st;
}

CONVERTER(convert_qlinear_add) { return binary(c, "Add"); }
CONVERTER(convert_qlinear_mul) { return binary(c, "Mul"); }
CONVERTER(convert_qlinear_sigmoid) { return unary(c, "Sigmoid", NULL); }

CONVERTER(convert_qlinear_leaky_relu)
{
    cge_node *n = NULL;
    cge_status st = unary(c, "LeakyRelu", &n);
    if (!st)
        st = cge_node_set_float(
            n, "alpha", cge_attrs_get_float(cge_node_attrs_const(c->src), "alpha", 0.01f));
    return st;
}

/* QLinearSoftmax's `opset` attribute says which Softmax it is; before 13,
 * Softmax coerced its input to 2-D (not supported here). */
CONVERTER(convert_qlinear_softmax)
{
    const cge_attrs *a = cge_node_attrs_const(c->src);
    int64_t v = cge_attrs_get_int(a, "opset", 13);
    if (v < 13)
        return unsupported(c, "Softmax semantics before opset 13 (opset attribute < 13)");
    cge_node *n = NULL;
    cge_status st = unary(c, "Softmax", &n);
    if (!st)
        st = cge_node_set_int(n, "axis", cge_attrs_get_int(a, "axis", -1));
    return st;
}

static bool channels_last(const qo *c)
{
    return cge_attrs_get_int(cge_node_attrs_const(c->src), "channels_last", 0) != 0;
}

CONVERTER(convert_qlinear_global_average_pool)
{
    if (channels_last(c))
        return unsupported(c, "channels_last=1");
    return unary(c, "GlobalAveragePool", NULL);
}

CONVERTER(convert_qlinear_average_pool)
{
    if (channels_last(c))
        return unsupported(c, "channels_last=1");
    cge_node *n = NULL;
    cge_status st = unary(c, "AveragePool", &n);
    const cge_attrs *a = cge_node_attrs_const(c->src);
    for (int32_t i = 0; !st && i < cge_attrs_count(a); i++)
        if (strcmp(cge_attrs_at(a, i)->name, "channels_last"))
            st = cge_attrs_set(cge_node_attrs(n), cge_attrs_at(a, i));
    return st;
}

/* axes (required) and keepdims (required) attributes; ReduceMean takes the
 * axes as an input. */
CONVERTER(convert_qlinear_reduce_mean)
{
    const cge_attrs *a = cge_node_attrs_const(c->src);
    const int64_t *axes = NULL;
    int64_t na = cge_attrs_get_ints(a, "axes", &axes);
    char x[512], f[512], an[512];
    int32_t ni = cge_node_num_inputs(c->src);
    if (ni < 4 || ni > 5)
        return bad(c, "wants 4 or 5 inputs");
    cge_status st = dequant(c, in(c, 0), in(c, 1), in(c, 2), 1, x, sizeof x);
    cge__onnx_fresh_name(c->dst, cge_node_output(c->src, 0), "axes", an, sizeof an);
    cge_shape ash = CGE_SHAPE(na);
    if (!st && na > 0)
        st = cge_graph_add_constant(c->dst, an, CGE_I64, &ash, axes, (size_t)na * sizeof *axes);
    const char *ins[2] = {x, na > 0 ? an : ""};
    cge_node *n = NULL;
    if (!st)
        st = add(c, "ReduceMean", ins, 2, NULL, f, sizeof f, &n);
    if (!st)
        st = cge_node_set_int(n, "keepdims", cge_attrs_get_int(a, "keepdims", 1));
    if (!st)
        st = quant(c, f, in(c, 3), in(c, 4), in(c, 2), in(c, 0), cge_node_output(c->src, 0));
    return st;
}

/* Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input. */
CONVERTER(convert_qlinear_concat)
{
    int32_t ni = cge_node_num_inputs(c->src);
    if (ni < 5 || (ni - 2) % 3 != 0)
        return bad(c, "wants Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples");
    int32_t nx = (ni - 2) / 3;
    char (*xs)[512] = calloc((size_t)nx, sizeof *xs);
    const char **ins = calloc((size_t)nx, sizeof *ins);
    cge_status st = xs && ins ? CGE_OK
                              : cge_error(CGE_LAYER_CONVERTER, CGE_ERR_NO_MEMORY, "out of memory");
    for (int32_t i = 0; !st && i < nx; i++) {
        st = dequant(c, in(c, 2 + 3 * i), in(c, 3 + 3 * i), in(c, 4 + 3 * i), 1, xs[i],
                     sizeof xs[i]);
        ins[i] = xs[i];
    }
    char f[512];
    cge_node *n = NULL;
    /* every input is an operand here: none may be dropped as "absent" */
    if (!st) {
        char name[512];
        const char *o = f;
        snprintf(name, sizeof name, "%s/Concat_%d", c->node, c->k++);
        cge__onnx_fresh_name(c->dst, cge_node_output(c->src, 0), "Concat", f, sizeof f);
        st = cge_graph_add_node(c->dst, "Concat", "", name, ins, nx, &o, 1, &n);
    }
    if (!st)
        st = cge_node_set_int(n, "axis",
                              cge_attrs_get_int(cge_node_attrs_const(c->src), "axis", 0));
    if (!st)
        st = quant(c, f, in(c, 0), in(c, 1), in(c, 4), in(c, 2), cge_node_output(c->src, 0));
    free(xs);
    free(ins);
    return st;
}

/* The product of two scales (a per-tensor one and a per-column one), as a
 * Mul that constant folding evaluates. */
static cge_status scale_product(qo *c, const char *s1, const char *s2, float alpha, char *out,
                                size_t outsz)
{
    const char *ins[2] = {s1, s2};
    cge_status st = add(c, "Mul", ins, 2, NULL, out, outsz, NULL);
    if (st || alpha == 1.0f)
        return st;
    char an[512], prod[512];
    snprintf(prod, sizeof prod, "%s", out);
    cge__onnx_fresh_name(c->dst, out, "alpha", an, sizeof an);
    cge_shape scalar = {.rank = 0};
    st = cge_graph_add_constant(c->dst, an, CGE_F32, &scalar, &alpha, sizeof alpha);
    const char *ins2[2] = {prod, an};
    if (!st)
        st = add(c, "Mul", ins2, 2, NULL, out, outsz, NULL);
    return st;
}

/* QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp): C is int32
 * with scale alpha * a_scale * b_scale (zero point 0); without y_scale the
 * output is float. b_scale is per tensor or per column of B (axis 1, or 0
 * with transB). */
CONVERTER(convert_qgemm)
{
    int32_t ni = cge_node_num_inputs(c->src);
    if (ni < 6 || ni > 9)
        return bad(c, "wants 6 to 9 inputs (A, a_scale, a_zero_point, B, b_scale, b_zero_point, "
                      "C, y_scale, y_zero_point)");
    const cge_attrs *at = cge_node_attrs_const(c->src);
    float alpha = cge_attrs_get_float(at, "alpha", 1.0f);
    int64_t ta = cge_attrs_get_int(at, "transA", 0), tb = cge_attrs_get_int(at, "transB", 0);
    char a[512], b[512], cb[512], cs[512], f[512];
    cge_status st = dequant(c, in(c, 0), in(c, 1), in(c, 2), 1, a, sizeof a);
    if (!st)
        st = dequant(c, in(c, 3), in(c, 4), in(c, 5), tb ? 0 : 1, b, sizeof b);
    cb[0] = 0;
    if (!st && in(c, 6)[0]) {
        st = scale_product(c, in(c, 1), in(c, 4), alpha, cs, sizeof cs);
        if (!st)
            st = dequant(c, in(c, 6), cs, "", -1, cb, sizeof cb);
    }
    bool qout = in(c, 7)[0] != 0;
    const char *ins[3] = {a, b, cb};
    cge_node *n = NULL;
    if (!st)
        st = add(c, "Gemm", ins, 3, qout ? NULL : cge_node_output(c->src, 0), f, sizeof f, &n);
    if (!st && alpha != 1.0f)
        st = cge_node_set_float(n, "alpha", alpha);
    if (!st && ta)
        st = cge_node_set_int(n, "transA", 1);
    if (!st && tb)
        st = cge_node_set_int(n, "transB", 1);
    if (!st && qout)
        st = quant(c, f, in(c, 7), in(c, 8), "", "", cge_node_output(c->src, 0));
    return st;
}

/* A float product with B dequantized per tensor or per column (B's last
 * axis), plus an optional bias: the tail of DynamicQuantizeMatMul and
 * MatMulIntegerToFloat. */
static cge_status matmul_dq_b(qo *c, const char *a, const char *bq, const char *bs,
                              const char *bz, const char *bias)
{
    char b[512], p[512];
    cge_status st = dequant(c, bq, bs, bz, -1, b, sizeof b);
    const char *ins[2] = {a, b};
    const char *y = cge_node_output(c->src, 0);
    if (!st)
        st = add(c, "MatMul", ins, 2, bias[0] ? NULL : y, p, sizeof p, NULL);
    const char *bi[2] = {p, bias};
    if (!st && bias[0])
        st = add(c, "Add", bi, 2, y, NULL, 0, NULL);
    return st;
}

/* DynamicQuantizeMatMul(A, B, b_scale, b_zero_point, bias): A quantized to
 * uint8 from its own range (DynamicQuantizeLinear), then the product of the
 * dequantized operands: ONNX Runtime's integer product, exactly, up to the
 * float sum's order. */
CONVERTER(convert_dynamic_quantize_matmul)
{
    int32_t ni = cge_node_num_inputs(c->src);
    if (ni < 3 || ni > 5)
        return bad(c, "wants 3 to 5 inputs (A, B, b_scale, b_zero_point, bias)");
    char aq[512], as[512], az[512], a[512], name[512];
    const char *y = cge_node_output(c->src, 0);
    cge__onnx_fresh_name(c->dst, y, "a_quantized", aq, sizeof aq);
    cge__onnx_fresh_name(c->dst, y, "a_scale", as, sizeof as);
    cge__onnx_fresh_name(c->dst, y, "a_zero_point", az, sizeof az);
    const char *outs[3] = {aq, as, az}, *x = in(c, 0);
    snprintf(name, sizeof name, "%s/DynamicQuantizeLinear", c->node);
    cge_status st = cge_graph_add_node(c->dst, "DynamicQuantizeLinear", "", name, &x, 1, outs, 3,
                                       NULL);
    if (!st)
        st = dequant(c, aq, as, az, 1, a, sizeof a);
    if (!st)
        st = matmul_dq_b(c, a, in(c, 1), in(c, 2), in(c, 3), in(c, 4));
    return st;
}

/* MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zero_point, b_zero_point,
 * bias): (A - a_zp) a_scale times (B - b_zp) b_scale, plus bias. */
CONVERTER(convert_matmul_integer_to_float)
{
    int32_t ni = cge_node_num_inputs(c->src);
    if (ni < 4 || ni > 7)
        return bad(c, "wants 4 to 7 inputs (A, B, a_scale, b_scale, a_zero_point, b_zero_point, "
                      "bias)");
    char a[512];
    cge_status st = dequant(c, in(c, 0), in(c, 2), in(c, 4), 1, a, sizeof a);
    if (!st)
        st = matmul_dq_b(c, a, in(c, 1), in(c, 3), in(c, 5), in(c, 6));
    return st;
}

/* com.microsoft QLinearConv is ONNX's with a channels_last attribute. */
CONVERTER(convert_ms_qlinear_conv)
{
    if (channels_last(c))
        return unsupported(c, "channels_last=1");
    const cge_converter_def same = {.target_op = "QLinearConv", .target_domain = ""};
    cge_status st = cge_converter_apply(&same, c->src, c->opset, c->dst);
    cge_node *n = st ? NULL : cge_graph_node(c->dst, cge_graph_num_nodes(c->dst) - 1);
    if (!st && cge_attrs_find(cge_node_attrs(n), "channels_last"))
        st = cge_attrs_remove(cge_node_attrs(n), "channels_last");
    return st;
}

#define MS(OP, FN)                                                                          \
    {.front_end = "onnx", .source_op = OP, .source_domain = "com.microsoft",                \
     .since_version = 1, .target_op = "QuantizeLinear", .target_domain = "", .convert = FN}

static const cge_converter_def converters[] = {
    MS("QLinearAdd", convert_qlinear_add),
    MS("QLinearMul", convert_qlinear_mul),
    MS("QLinearSigmoid", convert_qlinear_sigmoid),
    MS("QLinearLeakyRelu", convert_qlinear_leaky_relu),
    MS("QLinearSoftmax", convert_qlinear_softmax),
    MS("QLinearGlobalAveragePool", convert_qlinear_global_average_pool),
    MS("QLinearAveragePool", convert_qlinear_average_pool),
    MS("QLinearReduceMean", convert_qlinear_reduce_mean),
    MS("QLinearConcat", convert_qlinear_concat),
    MS("QGemm", convert_qgemm),
    MS("DynamicQuantizeMatMul", convert_dynamic_quantize_matmul),
    MS("MatMulIntegerToFloat", convert_matmul_integer_to_float),
    MS("QLinearConv", convert_ms_qlinear_conv),
};

static const cge_op_library library = {
    .api_version = CGE_OP_API_VERSION,
    .name = "onnx_qoperator",
    .converters = converters,
    .num_converters = (int32_t)(sizeof converters / sizeof converters[0]),
};

const cge_op_library *cge__onnx_qoperator_library(void) { return &library; }
