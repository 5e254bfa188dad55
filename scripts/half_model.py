"""float16 / bfloat16 copies of float32 ONNX models, as `model.half()` or a
float16 converter would write them: every float32 initializer, graph input,
output and value_info, Constant and Cast-to-float becomes the half type.
Used by the half-model tests and bench (`make bench-lowprec`, part "half").

    /usr/bin/python3 scripts/half_model.py model.onnx model_f16.onnx [float16|bfloat16]
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def bf16_bits(a):
    """float32 -> bfloat16 bits, rounding to nearest even (as cge does)."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits):
    """bfloat16 bits -> float32 values."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def round_to(a, half):
    """float32 values rounded to the half type, as float32."""
    if half == TensorProto.FLOAT16:
        return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)
    return bf16_value(bf16_bits(a))


def _halve_tensor(t, half):
    if t.data_type != TensorProto.FLOAT:
        return
    a = numpy_helper.to_array(t)
    if half == TensorProto.FLOAT16:
        t.CopyFrom(numpy_helper.from_array(a.astype(np.float16), t.name))
    else:
        t.CopyFrom(TensorProto(name=t.name, dims=list(a.shape), data_type=TensorProto.BFLOAT16,
                               raw_data=bf16_bits(a).tobytes()))


def _halve_graph(g, half):
    for t in g.initializer:
        _halve_tensor(t, half)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = half
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = half
            if a.type == onnx.AttributeProto.TENSOR:
                _halve_tensor(a.t, half)
            if a.type == onnx.AttributeProto.GRAPH:
                _halve_graph(a.g, half)


def halved(model, half=TensorProto.FLOAT16):
    """A half copy of `model` (a ModelProto or a path)."""
    m = onnx.load(model) if isinstance(model, str) else type(model).FromString(
        model.SerializeToString())
    _halve_graph(m.graph, half)
    return m


def rounded(model, half=TensorProto.FLOAT16):
    """A float32 copy of `model` whose initializers are rounded to the half
    type: what the half model computes, without rounding between nodes."""
    m = onnx.load(model) if isinstance(model, str) else type(model).FromString(
        model.SerializeToString())
    for t in m.graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(round_to(numpy_helper.to_array(t), half), t.name))
    return m


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    kind = sys.argv[3] if len(sys.argv) == 4 else "float16"
    if kind not in ("float16", "bfloat16"):
        sys.exit("half_model.py: the type is float16 or bfloat16, not %r" % kind)
    half = TensorProto.FLOAT16 if kind == "float16" else TensorProto.BFLOAT16
    onnx.save(halved(sys.argv[1], half), sys.argv[2])
