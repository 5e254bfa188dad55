#!/usr/bin/python3
# Generates the ONNX node-test fixtures for the binary_ext, variadic and
# unary_ext operator families: every single-node case of onnx's backend test
# suite (onnx 1.12) for those operators, with inputs, attributes and expected
# outputs, as binary_ext_fixtures.h, variadic_fixtures.h and
# unary_ext_fixtures.h beside this script (tables of ew2_case, ew2_case.h).
# Run: /usr/bin/python3 tests/ops/gen_ew2_fixtures.py
import math
import os

import numpy as np

# onnx 1.12's case generators still use aliases numpy 1.24 removed.
np.float = float
np.int = int
np.bool = bool
np.object = object
import onnx  # noqa: E402
from onnx.backend.test.case import node  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

FAMILIES = {
    "binary_ext": ["LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Mod", "BitShift",
                   "BitwiseAnd", "BitwiseOr", "BitwiseXor", "PRelu"],
    "variadic": ["Max", "Min", "Sum", "Mean"],
    "unary_ext": ["Not", "BitwiseNot", "Floor", "Ceil", "Round", "Sign", "IsNaN", "IsInf",
                  "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
                  "Acosh", "Atanh", "Softplus", "Softsign", "Elu", "Selu", "Celu",
                  "ThresholdedRelu", "HardSigmoid", "HardSwish", "Mish", "Shrink", "Clip",
                  "Dropout", "Hardmax"],
}
# Where cge's definition starts; older opsets are the ONNX importer's
# converters' job (Dropout before 12 had ratio as an attribute).
SINCE = {"Dropout": 12}
# Training-mode Dropout with a nonzero ratio draws random masks: cge refuses
# it in meta (inference engine), so these cases expect that error.
EXPECT_ERROR = {
    "test_training_dropout": "not supported",
    "test_training_dropout_mask": "not supported",
    "test_training_dropout_default": "not supported",
    "test_training_dropout_default_mask": "not supported",
}

CTYPE = {1: "float", 2: "uint8_t", 3: "int8_t", 4: "uint16_t", 5: "int16_t", 6: "int32_t",
         7: "int64_t", 9: "uint8_t", 10: "uint16_t", 11: "double", 12: "uint32_t",
         13: "uint64_t", 16: "uint16_t"}


def c_float(v, ctype):
    v = float(v)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    if ctype == "float":
        s = str(np.float32(v))
        return s + "f" if ("." in s or "e" in s) else s + ".0f"
    s = repr(v)
    return s if ("." in s or "e" in s) else s + ".0"


def c_items(a, elem):
    a = np.asarray(a).reshape(-1)
    if elem in (1, 11):
        return [c_float(v, CTYPE[elem]) for v in a]
    if elem == 10:
        return ["0x%04x" % int(v) for v in a.view(np.uint16)]
    if elem == 16:
        return ["0x%04x" % int(v) for v in a.view(np.uint16)]
    if elem == 9:
        return ["1" if v else "0" for v in a]
    if elem == 7:
        return ["INT64_C(%d)" % int(v) for v in a]
    if elem == 13:
        return ["UINT64_C(%d)" % int(v) for v in a]
    return [str(int(v)) for v in a]


def c_array(name, a, elem):
    items = c_items(a, elem)
    if not items:
        items = ["0"]
    lines = []
    for i in range(0, len(items), 6):
        lines.append("    " + ", ".join(items[i:i + 6]) + ",")
    return "static const %s %s[%d] = {\n%s\n};\n" % (CTYPE[elem], name, len(items),
                                                     "\n".join(lines))


def ident(s):
    return "".join(c if c.isalnum() else "_" for c in s)


def c_tensor(arrname, arr, elem):
    dims = ", ".join(str(d) for d in arr.shape)
    return "{%d, %d, {%s}, %s}" % (elem, arr.ndim, dims, arrname)


def c_attr(a):
    if a.type == onnx.AttributeProto.INT:
        return '{"%s", CGE_ATTR_INT, %d, 0.0f, NULL}' % (a.name, a.i)
    if a.type == onnx.AttributeProto.FLOAT:
        return '{"%s", CGE_ATTR_FLOAT, 0, %s, NULL}' % (a.name, c_float(a.f, "float"))
    if a.type == onnx.AttributeProto.STRING:
        return '{"%s", CGE_ATTR_STRING, 0, 0.0f, "%s"}' % (a.name, a.s.decode())
    raise ValueError("attribute kind %d" % a.type)


def main():
    cases = node.collect_testcases(None)
    fam_of = {op: fam for fam, ops in FAMILIES.items() for op in ops}
    out = {fam: ([], []) for fam in FAMILIES}  # (arrays, table rows)
    for c in sorted(cases, key=lambda c: c.name):
        g = c.model.graph
        if len(g.node) != 1 or g.node[0].op_type not in fam_of:
            continue
        nd = g.node[0]
        opset = c.model.opset_import[0].version
        if opset < SINCE.get(nd.op_type, 0):
            continue
        fam = fam_of[nd.op_type]
        arrays, rows = out[fam]
        for ds, (inputs, outputs) in enumerate(c.data_sets):
            base = ident(c.name) + ("_%d" % ds if ds else "")
            ins = []
            k = 0
            for nm in nd.input:
                if nm == "":
                    ins.append("{0, 0, {0}, NULL}")
                    continue
                arr = np.asarray(inputs[k])
                elem = g.input[k].type.tensor_type.elem_type
                k += 1
                an = "%s_in%d" % (base, len(ins))
                arrays.append(c_array(an, arr, elem))
                ins.append(c_tensor(an, arr, elem))
            outs = []
            for i, arr in enumerate(outputs):
                arr = np.asarray(arr)
                elem = g.output[i].type.tensor_type.elem_type
                an = "%s_out%d" % (base, i)
                arrays.append(c_array(an, arr, elem))
                outs.append(c_tensor(an, arr, elem))
            attrs = [c_attr(a) for a in nd.attribute]
            err = EXPECT_ERROR.get(c.name)
            rows.append(
                '    {"%s", "%s", %d, {%s}, %d, {%s}, %d, {%s}, %s},\n' % (
                    c.name, nd.op_type, len(ins), ", ".join(ins), len(outs), ", ".join(outs),
                    len(attrs), ", ".join(attrs) if attrs else "{0}",
                    '"%s"' % err if err else "NULL"))
    # Extra numpy references for operators without onnx 1.12 node cases.
    x = np.concatenate([np.linspace(-12, 12, 49), np.random.default_rng(7).normal(0, 3, 15)])
    x = x.astype(np.float32)
    xd = x.astype(np.float64)
    mish = xd * np.tanh(np.log1p(np.exp(xd)))
    out["unary_ext"][0].append(c_array("mish_x", x, 1))
    out["unary_ext"][0].append(c_array("mish_f32", mish.astype(np.float32), 1))
    out["unary_ext"][0].append(c_array("mish_f64", mish, 11))
    for fam, (arrays, rows) in out.items():
        guard = "CGE_TEST_%s_FIXTURES_H" % fam.upper()
        with open(os.path.join(HERE, fam + "_fixtures.h"), "w") as f:
            f.write("/* Generated by gen_ew2_fixtures.py from onnx %s's node test cases (numpy\n"
                    " * %s): the %s family's cases. Do not edit; rerun the script. */\n"
                    % (onnx.__version__, np.__version__, fam))
            f.write("#ifndef %s\n#define %s\n\n" % (guard, guard))
            f.write('#include "ew2_case.h"\n\n')
            f.write("\n".join(arrays))
            f.write("\nstatic const ew2_case %s_cases[] = {\n" % fam)
            f.write("".join(rows))
            f.write("};\n\n#endif\n")
        print(fam, len(rows), "cases")


if __name__ == "__main__":
    main()
