"""float16 / bfloat16 copies of float32 ONNX models, as `model.half()` or a
float16 converter would write them: every float32 initializer, graph input,
output and value_info, Constant and Cast-to-float becomes the half type,
except the inputs ONNX types as float32 only (Resize's scales, Upsample's,
NonMaxSuppression's boxes, scores and thresholds: constants stay float32,
computed values get a Cast to float32).
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


# Inputs ONNX types as float32 only: they stay float32 (constants), or get a
# Cast to float32 (computed values), as float16 converters do.
_FLOAT32_ONLY = {"Resize": (2,), "Upsample": (1,), "NonMaxSuppression": (0, 1, 3, 4)}


def _keep_float32(g):
    """Names of the float32-only inputs of g's nodes, and Cast nodes for
    the computed ones (inserted before their readers)."""
    keep, casts = set(), []
    produced = {o for n in g.node for o in n.output}
    consts = {o for n in g.node if n.op_type == "Constant" for o in n.output}
    for n in g.node:
        for i in _FLOAT32_ONLY.get(n.op_type, ()):
            if i >= len(n.input) or not n.input[i]:
                continue
            name = n.input[i]
            if name in produced and name not in consts:
                cast = name + "__as_float32"
                casts.append((n, i, onnx.helper.make_node("Cast", [name], [cast],
                                                          to=TensorProto.FLOAT)))
            else:
                keep.add(name)
    return keep, casts


def _halve_graph(g, half):
    keep, casts = _keep_float32(g)
    for t in g.initializer:
        if t.name not in keep:
            _halve_tensor(t, half)
    for reader, i, cast in casts:
        reader.input[i] = cast.output[0]
    nodes = list(g.node)
    for reader, i, cast in casts:
        nodes.insert(nodes.index(reader), cast)
    del g.node[:]
    g.node.extend(nodes)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = half
    for n in g.node:
        if any(n.output[0] == c.output[0] for _, _, c in casts):
            continue   # a Cast made above, to float32
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = half
            if a.type == onnx.AttributeProto.TENSOR and not (n.op_type == "Constant" and
                                                             n.output[0] in keep):
                _halve_tensor(a.t, half)
            if a.type == onnx.AttributeProto.GRAPH:
                _halve_graph(a.g, half)


def halved(model, half=TensorProto.FLOAT16):
    """A half copy of `model` (a ModelProto or a path)."""
    m = onnx.load(model) if isinstance(model, str) else type(model).FromString(
        model.SerializeToString())
    _halve_graph(m.graph, half)
    return m


def _round_graph(g, half):
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(round_to(numpy_helper.to_array(t), half), t.name))
    for n in g.node:
        for a in n.attribute:
            if (n.op_type == "Constant" and a.type == onnx.AttributeProto.TENSOR and
                    a.t.data_type == TensorProto.FLOAT):
                a.t.CopyFrom(numpy_helper.from_array(round_to(numpy_helper.to_array(a.t), half)))
            if a.type == onnx.AttributeProto.GRAPH:
                _round_graph(a.g, half)


def rounded(model, half=TensorProto.FLOAT16):
    """A float32 copy of `model` whose initializers and Constants (those of
    its If/Loop/Scan bodies too) are rounded to the half type: what the half
    model computes, without rounding between nodes."""
    m = onnx.load(model) if isinstance(model, str) else type(model).FromString(
        model.SerializeToString())
    _round_graph(m.graph, half)
    return m


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    kind = sys.argv[3] if len(sys.argv) == 4 else "float16"
    if kind not in ("float16", "bfloat16"):
        sys.exit("half_model.py: the type is float16 or bfloat16, not %r" % kind)
    half = TensorProto.FLOAT16 if kind == "float16" else TensorProto.BFLOAT16
    onnx.save(halved(sys.argv[1], half), sys.argv[2])
