#!/usr/bin/python3
# Fixtures from the ONNX 1.12 node test cases (onnx.backend.test.case.node) for
# the data/index/reduction families: every single-node case of the ops below,
# inputs, attributes and expected outputs, as onnx_node_case.h's fx_case table.
# Run: python3 gen_data_fixtures.py reduce_ext > reduce_ext_fixtures.h
#      (likewise index, generate)
import math
import sys

import numpy as np

# onnx 1.12's test generators still use the removed numpy aliases.
np.float = float
np.int = int
np.bool = bool
np.object = object
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnx.backend.test.case import node  # noqa: E402

FAMILIES = {
    "reduce_ext": ["ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                   "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin"],
    "index": ["GatherElements", "GatherND", "ScatterND", "ScatterElements", "OneHot", "NonZero",
              "TopK", "CumSum", "Trilu", "Compress"],
    "generate": ["Range", "ConstantOfShape", "EyeLike", "Tile", "Size", "DepthToSpace",
                 "SpaceToDepth", "ReverseSequence"],
}
# Reductions whose axes moved from an attribute to an input in opset 18: each
# opset-13 case is emitted a second time in the opset-18 form.
AXES_TO_INPUT = {"ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                 "ReduceLogSumExp", "ReduceSumSquare"}

NP2CGE = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3,
          np.dtype(np.uint16): 4, np.dtype(np.int16): 5, np.dtype(np.int32): 6,
          np.dtype(np.int64): 7, np.dtype(np.bool_): 9, np.dtype(np.float16): 10,
          np.dtype(np.float64): 11, np.dtype(np.uint32): 12, np.dtype(np.uint64): 13}
CTYPE = {1: "float", 2: "uint8_t", 3: "int8_t", 4: "uint16_t", 5: "int16_t", 6: "int32_t",
         7: "int64_t", 9: "uint8_t", 10: "uint16_t", 11: "double", 12: "uint32_t",
         13: "uint64_t"}

out = []
counter = [0]


def fnum(v, suffix):
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    t = ("%.9g" if suffix == "f" else "%.17g") % v
    if not any(ch in t for ch in ".en"):
        t += ".0"
    return t + suffix


def ival(v, dt):
    v = int(v)
    if dt == 7:
        return "INT64_MIN" if v == -(2**63) else "%dLL" % v
    if dt == 13:
        return "%dULL" % v
    return "%d" % v


def emit_array(arr):
    """Emits a static array for `arr`; returns (cge dtype, C name)."""
    a = np.ascontiguousarray(arr)
    dt = NP2CGE[a.dtype]
    flat = a.reshape(-1)
    if dt == 1:
        vals = [fnum(float(v), "f") for v in flat]
    elif dt == 11:
        vals = [fnum(float(v), "") for v in flat]
    elif dt == 10:
        vals = ["0x%04x" % v for v in flat.view(np.uint16)]
    elif dt == 9:
        vals = ["%d" % int(v) for v in flat]
    else:
        vals = [ival(v, dt) for v in flat]
    counter[0] += 1
    name = "fx_d%d" % counter[0]
    if not vals:
        vals = ["0"]
    out.append("static const %s %s[] = {%s};" % (CTYPE[dt], name, ", ".join(vals)))
    return dt, name


def tensor_init(arr):
    dt, name = emit_array(arr)
    dims = ", ".join("%d" % d for d in arr.shape) or "0"
    return "{%d, %d, {%s}, %s}" % (dt, arr.ndim, dims, name)


ABSENT = "{0, 0, {0}, NULL}"


def attr_init(a):
    k = a.type
    if k == onnx.AttributeProto.INT:
        return '{"%s", 2, %dLL, 0.0f, NULL, 0, NULL, NULL, NULL}' % (a.name, a.i)
    if k == onnx.AttributeProto.FLOAT:
        return '{"%s", 1, 0, %s, NULL, 0, NULL, NULL, NULL}' % (a.name, fnum(a.f, "f"))
    if k == onnx.AttributeProto.STRING:
        return '{"%s", 3, 0, 0.0f, "%s", 0, NULL, NULL, NULL}' % (a.name, a.s.decode())
    if k == onnx.AttributeProto.INTS:
        _, name = emit_array(np.array(list(a.ints), dtype=np.int64))
        return '{"%s", 7, 0, 0.0f, NULL, %d, %s, NULL, NULL}' % (a.name, len(a.ints), name)
    if k == onnx.AttributeProto.FLOATS:
        _, name = emit_array(np.array(list(a.floats), dtype=np.float32))
        return '{"%s", 6, 0, 0.0f, NULL, %d, NULL, %s, NULL}' % (a.name, len(a.floats), name)
    if k == onnx.AttributeProto.TENSOR:
        arr = numpy_helper.to_array(a.t)
        counter[0] += 1
        tname = "fx_t%d" % counter[0]
        init = tensor_init(arr)
        out.append("static const fx_tensor %s = %s;" % (tname, init))
        return '{"%s", 4, 0, 0.0f, NULL, 0, NULL, NULL, &%s}' % (a.name, tname)
    raise ValueError("attribute kind %d" % k)


def emit_case(name, op, opset, inputs, outputs, attrs):
    ins = ", ".join(ABSENT if x is None else tensor_init(x) for x in inputs) or ABSENT
    outs = ", ".join(tensor_init(x) for x in outputs)
    ats = ", ".join(attr_init(a) for a in attrs) or '{NULL, 0, 0, 0.0f, NULL, 0, NULL, NULL, NULL}'
    return '    {"%s", "%s", %d, %d, {%s}, %d, {%s}, %d, {%s}},' % (
        name, op, opset, len(inputs), ins, len(outputs), outs, len(attrs), ats)


def main():
    family = sys.argv[1]
    ops = set(FAMILIES[family])
    cases = node.collect_testcases(None)
    rows = []
    out.append("/* Generated by gen_data_fixtures.py %s from the ONNX %s node test cases;"
               " do not edit. */" % (family, onnx.__version__))
    guard = family.upper() + "_FIXTURES_H"
    out.append("#ifndef " + guard)
    out.append("#define " + guard)
    out.append('#include "onnx_node_case.h"')
    for t in cases:
        g = t.model.graph
        if len(g.node) != 1 or g.node[0].op_type not in ops or not t.name.startswith("test_"):
            continue
        n = g.node[0]
        opset = max(o.version for o in t.model.opset_import if o.domain in ("", "ai.onnx"))
        for ds_i, (ins, outs) in enumerate(t.data_sets):
            by_name = {gi.name: ins[i] for i, gi in enumerate(g.input)}
            inputs = [by_name[nm] if nm else None for nm in n.input]
            outputs = list(outs)
            nm = t.name if ds_i == 0 else "%s_%d" % (t.name, ds_i)
            rows.append(emit_case(nm, n.op_type, opset, inputs, outputs, list(n.attribute)))
            if n.op_type in AXES_TO_INPUT:
                axes = None
                rest = []
                for a in n.attribute:
                    if a.name == "axes":
                        axes = np.array(list(a.ints), dtype=np.int64)
                    else:
                        rest.append(a)
                rows.append(emit_case(nm + "_v18", n.op_type, 18,
                                      inputs + ([axes] if axes is not None else []), outputs,
                                      rest))
    out.append("static const fx_case %s_cases[] = {" % family)
    out.extend(rows)
    out.append("};")
    out.append("#endif")
    print("\n".join(out))


main()
